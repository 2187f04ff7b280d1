package httpagent_test

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// TestEmptyStopReasonEndsTurn: an HTTP agent whose final e2a.complete
// result carries an empty stop_reason (a Go agent's struct field
// `json:"stop_reason"` left unset writes "") is answered end_turn over
// ACP: an empty stop reason is none, never the session/prompt result's
// stopReason "" (none of ACP's stop reasons).
func TestEmptyStopReasonEndsTurn(t *testing.T) {
	srv := newRecorder(t, func(int) string {
		return `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"Sunny."}}` + "\n" +
			`{"response_kind":"e2a.complete","body":{"result":{"text":"Sunny.","stop_reason":""}}}` + "\n"
	})
	r := newRig(t, srv.URL, rigConfig{})
	prompt := openACP(t, r.p)
	if stop, said := prompt("the weather"); stop != acp.StopReasonEndTurn || said != "Sunny." {
		t.Fatalf("prompt: stopReason %q, text %q; want %q, \"Sunny.\"", stop, said, acp.StopReasonEndTurn)
	}
}

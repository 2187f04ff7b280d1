package host_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestIsCancelCall: only one valid JSON-RPC call of a cancel method, its
// params an object, within host.MaxCancelBody, is a cancel: not a batch
// (even of cancels alone), not a body cut short, a call without
// "jsonrpc", params of another type, or a larger body.
func TestIsCancelCall(t *testing.T) {
	isCancel := func(m string) bool { return m == "tasks/cancel" }
	call := `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"t"}}`
	for body, want := range map[string]bool{
		call: true,
		`{"jsonrpc":"2.0","method":"tasks/cancel","params":{"id":"t"}}`:                   true, // a notification
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"id":"tasks/cancel"}}`: false,
		"[" + call + "]": false,
		"[" + call + `,{"jsonrpc":"2.0","id":2,"method":"message/send","params":{}}]`: false,
		strings.TrimSuffix(call, "}"):                                                                                        false,
		`{"id":1,"method":"tasks/cancel","params":{"id":"t"}}`:                                                               false,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":["t"]}`:                                                    false,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel"}`:                                                                   false,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"` + strings.Repeat("x", host.MaxCancelBody) + `"}}`: false,
	} {
		if got := host.IsCancelCall([]byte(body), isCancel); got != want {
			t.Errorf("IsCancelCall(%.80s) = %v, want %v", body, got, want)
		}
	}
	if host.IsCancelCall([]byte(call), nil) {
		t.Error("a cancel of an endpoint without cancels")
	}
}

// TestIsOpenCall: only one valid JSON-RPC call with an id of an open
// method, its params an object, within host.MaxRefusalBody, is an open
// call: not a notification, nor a batch, nor any other method.
func TestIsOpenCall(t *testing.T) {
	open := func(m string) bool { return m == "initialize" }
	call := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	for body, want := range map[string]bool{
		call: true,
		`{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}`: false, // a notification
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}`:   false,
		"[" + call + "]": false,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":[1]}`:                                                      false,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{}}`:                                                 false,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"p":"` + strings.Repeat("x", host.MaxRefusalBody) + `"}}`: false,
	} {
		if got := host.IsOpenCall([]byte(body), open); got != want {
			t.Errorf("IsOpenCall(%.80s) = %v, want %v", body, got, want)
		}
	}
	if host.IsOpenCall([]byte(call), nil) {
		t.Error("an open call of an endpoint without open methods")
	}
}

// TestPeekBody: PeekBody reads at most limit+1 bytes, says whether the
// body is whole, and the request's handler then reads the body as sent,
// a body longer than the limit too.
func TestPeekBody(t *testing.T) {
	for _, body := range []string{"", "short", strings.Repeat("y", 100)} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		b, whole := host.PeekBody(r, 10)
		if whole != (len(body) <= 10) || len(b) > 11 || !strings.HasPrefix(body, string(b)) {
			t.Errorf("PeekBody of %d bytes: %q whole %v", len(body), b, whole)
		}
		if rest, err := io.ReadAll(r.Body); err != nil || string(rest) != body {
			t.Errorf("the body read after PeekBody: %q %v, want %q", rest, err, body)
		}
		if err := r.Body.Close(); err != nil {
			t.Error(err)
		}
	}
}

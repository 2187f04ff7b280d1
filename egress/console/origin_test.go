package console_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
)

// TestIndexOrigin: the protocol column shows the envelope's finer origin
// (provenance.details.ingress_protocol) where source_protocol holds only the
// specification's e2a, acp or a2a: a legacy AgentRequest is listed as
// agent_request, not e2a.
func TestIndexOrigin(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	legacy := p.submit(t, `{"req_method":"chat.send","params":{"text":"old"}}`, "X-Api-Key", keyAlice)
	plain := p.submit(t, `{"method":"chat.send","params":{"text":"new"}}`, "X-Api-Key", keyAlice)
	got := waitFinal(t, p, legacy, plain)
	if got[legacy].Protocol != "agent_request" || got[plain].Protocol != "e2a" {
		t.Errorf("legacy %q, plain %q", got[legacy].Protocol, got[plain].Protocol)
	}
}

// TestIndexA2AVersion: an A2A request whose envelope names the A2A
// version it came in (provenance.details.a2a_version, which the door
// writes) is listed as a2a/v<version>, so that v1.0 and v0.3 calls of the
// same method are told apart; without it, as a2a; another origin
// (AgentVault) keeps its name.
func TestIndexA2AVersion(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	prov := []string{
		`{"source_protocol":"a2a","details":{"a2a_version":"1.0"}}`,
		`{"source_protocol":"a2a","details":{"a2a_version":"0.3"}}`,
		`{"source_protocol":"a2a","details":{}}`,
		`{"source_protocol":"a2a","details":{"ingress_protocol":"agentvault"}}`,
	}
	want := []string{"a2a/v1.0", "a2a/v0.3", "a2a", "agentvault"}
	ids := publishRequests(t, p.nc, "idle", len(prov), func(i int) string {
		return `{"request_id":"bulk-000` + string(rune('0'+i)) + `","method":"message/send","provenance":` + prov[i] + `,"params":{}}`
	})
	waitIndexed(t, p, ids...)
	for i, id := range ids {
		e, err := p.con.Lookup(t.Context(), id)
		if err != nil || e == nil || e.Protocol != want[i] {
			t.Errorf("provenance %s: entry %+v %v; want protocol %q", prov[i], e, err, want[i])
		}
	}
}

// TestIndexA2AVersionFromTheDoor: the v0.3 door writes the version it came
// in (a2a_version "0.3"), so that the console lists its message/send as
// a2a/v0.3 (the v1.0 door's, TestInterruptedTurnAnswered).
func TestIndexA2AVersionFromTheDoor(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	resp, b := p.do(t, "POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":`+
		`{"kind":"message","role":"user","messageId":"m-v03","parts":[{"kind":"text","text":"hi"}]}}}`, "Content-Type", "application/json")
	var r struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Result.ID == "" {
		t.Fatalf("message/send: %d %s", resp.StatusCode, b)
	}
	waitFor(t, 20*time.Second, "the v0.3 call listed as a2a/v0.3", func() bool {
		pg, err := p.con.List(t.Context(), console.Query{TaskID: r.Result.ID})
		return err == nil && len(pg.Entries) == 1 && pg.Entries[0].Protocol == "a2a/v0.3"
	})
}

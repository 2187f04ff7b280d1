package e2a_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestErrorBodyDetails: spec §12.5 gives e2a.error bodies code, message and
// details; details is written ({}) even when the producer has none
// (issue 16: bodies omitted it).
func TestErrorBodyDetails(t *testing.T) {
	for _, c := range []struct {
		body e2a.ErrorBody
		want string
	}{
		{e2a.ErrorBody{Code: "cancelled", Message: "m"}, `{"code":"cancelled","message":"m","details":{},"retryable":false}`},
		{e2a.ErrorBody{Code: "x", Message: "m", Details: map[string]any{"a": 1}, Retryable: true},
			`{"code":"x","message":"m","details":{"a":1},"retryable":true}`},
	} {
		for _, v := range []any{c.body, &c.body} {
			b, err := json.Marshal(v)
			if err != nil || string(b) != c.want {
				t.Errorf("%s %v, want %s", b, err, c.want)
			}
		}
		if got := string(e2a.MarshalBody(c.body)); got != c.want {
			t.Errorf("MarshalBody: %s", got)
		}
	}
	r := &e2a.Response{ResponseKind: e2a.KindError, Body: e2a.MarshalBody(e2a.ErrorBody{Code: "c", Message: "m"})}
	b, err := r.Error()
	if err != nil || b.Details == nil || len(b.Details) != 0 || !strings.Contains(string(r.Body), `"details":{}`) {
		t.Fatalf("%+v %v %s", b, err, r.Body)
	}
}

// TestSpecifyProvenance: source_protocol stays in the specification's set;
// a finer origin moves to details.ingress_protocol.
func TestSpecifyProvenance(t *testing.T) {
	for origin, want := range map[string]string{"e2a": "e2a", "acp": "acp", "a2a": "a2a", "agentvault": "a2a",
		"a2e": "e2a", "agent_request": "e2a", "mqtt": "e2a"} {
		p := &e2a.Provenance{SourceProtocol: origin}
		e2a.SpecifyProvenance(p)
		_, has := p.Details[e2a.DetailIngressProtocol]
		if p.SourceProtocol != want || has != (origin != want) || (has && p.Details[e2a.DetailIngressProtocol] != origin) {
			t.Errorf("%s: %+v", origin, p)
		}
	}
	p := &e2a.Provenance{SourceProtocol: "a2e", Details: map[string]any{e2a.DetailIngressProtocol: "kept"}}
	if e2a.SpecifyProvenance(p); p.SourceProtocol != "e2a" || p.Details[e2a.DetailIngressProtocol] != "kept" {
		t.Errorf("%+v", p)
	}
}

// PlainJSON reads a typed value as a client decodes it, and keeps a value
// that does not encode.
func TestPlainJSON(t *testing.T) {
	got := e2a.PlainJSON(e2a.ErrorBody{Code: "x", Message: "m", Details: map[string]any{"n": 2}})
	m, ok := got.(map[string]any)
	if !ok || m["code"] != "x" || m["retryable"] != false || m["details"].(map[string]any)["n"] != float64(2) {
		t.Fatalf("%#v", got)
	}
	ch := make(chan int)
	if got := e2a.PlainJSON(ch); got != any(ch) {
		t.Fatalf("unencodable value replaced: %#v", got)
	}
}

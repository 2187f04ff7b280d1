package console_test

import "testing"

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

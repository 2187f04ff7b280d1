package a2e_test

import (
	"fmt"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestInvalidPoolNotRetryable: a submission refused because the agent pool
// named (?agent=) is not a valid pool name (host.ErrInvalidPool) can never
// succeed: invalid_agent, retryable false (E2A: 400 invalid_agent). It was
// answered "unavailable", retryable, so a client retried it for ever.
func TestInvalidPoolNotRetryable(t *testing.T) {
	h := &fakeHost{PublishErr: fmt.Errorf("%w: %q", host.ErrInvalidPool, "a.b")}
	_, msgs := post(t, h, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}`+"\n")
	if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType || msgs[0].ReqID != "r-1" {
		t.Fatalf("answer %+v, want one error line for r-1", msgs)
	}
	if m := msgs[0]; m.Retryable == nil || *m.Retryable || m.Code != "invalid_agent" {
		t.Errorf("invalid pool name answered code %q retryable %v (%q); want invalid_agent, not retryable",
			m.Code, m.Retryable, m.Message)
	}
}

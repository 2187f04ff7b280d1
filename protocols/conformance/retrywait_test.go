package conformance_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestRPCHostSlotRendersRefusalsWait: the JSON-RPC fake host refuses a
// stream slot with host.TooManyStreams and its own wait, as the real host
// does: made 3 s, the answer says Retry-After: 3 (it set 1 by hand,
// whatever the refusal's wait). The test runs alone: it changes a refusal
// every door renders.
func TestRPCHostSlotRendersRefusalsWait(t *testing.T) {
	was := host.TooManyStreams.RetryAfter
	host.TooManyStreams.RetryAfter = 3 * time.Second
	t.Cleanup(func() { host.TooManyStreams.RetryAfter = was })
	h := &conformance.RPCHost{Host: conformance.Host{NoSlot: true}}
	rec := httptest.NewRecorder()
	if _, ok := h.Caller().StreamSlot(host.HTTPReply(rec, json.RawMessage(`1`))); ok {
		t.Fatal("a slot with NoSlot")
	}
	if rec.Code != host.TooManyStreams.Status || rec.Header().Get("Retry-After") != "3" {
		t.Errorf("%d Retry-After %q, want %d with the refusal's 3 s", rec.Code, rec.Header().Get("Retry-After"), host.TooManyStreams.Status)
	}
}

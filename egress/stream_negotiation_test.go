package egress

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestStreamNotAcceptable: a request's stream is SSE or NDJSON; an Accept
// header that allows neither (each ruled out with q=0, or only other
// types listed) gets 406 not_acceptable, and wildcards are read as ranges
// (RFC 9110 §12.5.1). Such a client got SSE it had ruled out.
func TestStreamNotAcceptable(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "req_na", 1)
	for accept, want := range map[string]string{
		"text/event-stream;q=0":                           "406",
		"text/event-stream;q=0, application/x-ndjson;q=0": "406",
		"application/json":                                "406",
		"text/*;q=0, application/json":                    "406",
		"*/*":                                             "text/event-stream",
		"application/*":                                   "application/x-ndjson",
		"text/*;q=0, */*":                                 "application/x-ndjson",
		"text/event-stream;q=0, application/x-ndjson":     "application/x-ndjson",
		"text/plain, text/*":                              "text/event-stream",
	} {
		resp := h.get(t, "/v1/requests/req_na/stream", "Accept", accept)
		got := resp.Header.Get("Content-Type")
		if resp.StatusCode == http.StatusNotAcceptable {
			var body APIError
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Code != CodeNotAccept || body.Error.Message == "" {
				t.Errorf("Accept: %s: 406 body %+v (%v)", accept, body, err)
			}
			got = "406"
		}
		resp.Body.Close()
		if got != want {
			t.Errorf("Accept: %s: answered %s (status %d), want %s", accept, got, resp.StatusCode, want)
		}
	}
}

// slotGate is a ReadGate that admits everything and counts the stream
// slots taken.
type slotGate struct{ taken atomic.Int32 }

func (g *slotGate) Admit(http.ResponseWriter, *http.Request, tenant.Principal) bool { return true }
func (g *slotGate) StreamSlot(http.ResponseWriter, tenant.Principal) (func(), bool) {
	g.taken.Add(1)
	return func() {}, true
}
func (g *slotGate) Refuse(http.ResponseWriter, error) bool { return false }

var _ ReadGate = (*slotGate)(nil)

// TestStreamHeadTakesNoSlot: HEAD of a running request's stream answers
// the head a GET opens with (200, its media type) and takes none of the
// reader's stream slots: it held one, as a GET does, until the request
// ended.
func TestStreamHeadTakesNoSlot(t *testing.T) {
	h := startHTTP(t)
	g := &slotGate{}
	h.svc.SetReadGate(g)
	h.running(t, "req_head")
	for accept, want := range map[string]string{"": "text/event-stream", "application/x-ndjson": "application/x-ndjson"} {
		var hdr []string
		if accept != "" {
			hdr = []string{"Accept", accept}
		}
		resp := testkit.Open(t, http.MethodHead, h.srv.URL+"/v1/requests/req_head/stream", "", hdr...)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != want {
			t.Errorf("HEAD (Accept %q): %d %q, want 200 %q", accept, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
	if n := g.taken.Load(); n != 0 {
		t.Errorf("HEAD took %d stream slots", n)
	}
	resp := testkit.Open(t, http.MethodHead, h.srv.URL+"/v1/requests/nope/stream", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of an unknown request: %d, want 404", resp.StatusCode)
	}
}

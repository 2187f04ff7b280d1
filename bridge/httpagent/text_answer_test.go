package httpagent_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestTextAnswer: an agent that answers text/plain, the smallest HTTP
// agent of all, is the request's result, a string, its trailing line break
// dropped, on every front door (E2A, A2A v1.0 and v0.3, ACP). Such an
// answer was upstream_protocol_error.
func TestTextAnswer(t *testing.T) {
	t.Parallel()
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if _, err := e2a.FromJSON(b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Done ✓\n")
	}))
	t.Cleanup(agentSrv.Close)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("txt")))
	bridgePool(t, p, "txt", agentSrv.URL)

	a := p.Ask(t, "txt", `{"request_id":"e2a-1","params":{"text":"hello"}}`)
	if f := a.Final(); f == nil || f.ResponseKind != "e2a.complete" || f.Status != e2a.StatusSucceeded ||
		string(f.Body) != `{"result":"Done ✓"}` {
		t.Fatalf("E2A final frame %+v", f)
	}

	if got := a2aV1Answer(t, p, "txt", "v1"); got != "Done ✓" {
		t.Errorf("A2A v1.0 answer %q", got)
	}
	if got := a2aV03Answer(t, p, "txt", "v03"); got != "Done ✓" {
		t.Errorf("A2A v0.3 answer %q", got)
	}
	if got := acpAnswer(t, p, "acp"); got != "Done ✓" {
		t.Errorf("ACP agent messages %q", got)
	}
}

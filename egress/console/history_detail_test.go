package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// memHistory is an egress.History holding the requests copied into it.
// While fail is set, every lookup fails (a history that cannot be read).
type memHistory struct {
	mu   sync.Mutex
	reqs map[string]egress.HistoricRequest
	fail atomic.Bool
}

func (h *memHistory) Request(_ context.Context, id string) (egress.HistoricRequest, error) {
	if h.fail.Load() {
		return egress.HistoricRequest{}, errors.New("the history cannot be read")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.reqs[id]
	if !ok {
		return egress.HistoricRequest{}, fmt.Errorf("%w: %q", egress.ErrNotFound, id)
	}
	return r, nil
}

// keep copies what the hot streams hold of request id into h, as the
// audit history holds it, then drops it from the hot streams.
func (h *memHistory) keep(t *testing.T, p *pipeline, id string) {
	t.Helper()
	env, frames := natstest.StoredRequest(t, p.nc, id)
	r := egress.HistoricRequest{Envelope: env}
	for _, f := range frames {
		r.Frames = append(r.Frames, egress.HistoricFrame{Raw: f.Raw, StreamSeq: f.Seq})
	}
	h.mu.Lock()
	h.reqs[id] = r
	h.mu.Unlock()
	js := natstest.JetStream(t, p.nc)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
}

// TestDetailFromHistory: a request the hot streams dropped but the audit
// history still holds (egress.WithHistory) is answered by egress's GET
// /v1/requests/{id} and streamed by the console, but its detail,
// /console/api/requests/{id}, was 404 "request not found", shown above
// the transcript. The detail now comes from the history too, to the
// principal its owner allows; another principal gets exactly the answer
// of an unknown id.
func TestDetailFromHistory(t *testing.T) {
	h := &memHistory{reqs: map[string]egress.HistoricRequest{}}
	p := startPipeline(t, pipelineOptions{auth: true, egress: []egress.Option{egress.WithHistory(h)}})
	id := p.submit(t, `{"params":{"text":"kept in the audit history","frames":2}}`, "X-Api-Key", keyAlice)
	waitFinal(t, p, id)
	h.keep(t, p, id)

	if resp, b := p.do(t, "GET", "/v1/requests/"+id, "", "X-Api-Key", keyAlice); resp.StatusCode != 200 {
		t.Fatalf("GET /v1/requests/{id} of a request in the history: %d %s", resp.StatusCode, b)
	}
	for _, key := range []string{keyAlice, keyOps} {
		resp, b := p.do(t, "GET", "/console/api/requests/"+id, "", "X-Api-Key", key)
		var d struct {
			RequestID string         `json:"request_id"`
			History   bool           `json:"history"`
			Envelope  map[string]any `json:"envelope"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &d) != nil || d.RequestID != id || !d.History ||
			d.Envelope["request_id"] != id || d.Envelope["user_id"] != "alice" {
			t.Errorf("detail of a request in the history (key %.6s…): %d %s", key, resp.StatusCode, b)
		}
	}
	unknown := uuid.Must(uuid.NewV7()).String()
	uresp, ub := p.do(t, "GET", "/console/api/requests/"+unknown, "", "X-Api-Key", keyBob)
	if uresp.StatusCode != 404 {
		t.Fatalf("detail of an unknown id: %d %s", uresp.StatusCode, ub)
	}
	resp, b := p.do(t, "GET", "/console/api/requests/"+id, "", "X-Api-Key", keyBob)
	if resp.StatusCode != uresp.StatusCode || string(b) != string(ub) {
		t.Errorf("another principal's request in the history: %d %s; want the unknown id's %d %s", resp.StatusCode, b, uresp.StatusCode, ub)
	}
}

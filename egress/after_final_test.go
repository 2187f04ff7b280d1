package egress

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestResumePastFinalNothingAfter: a frame stored after the final one
// (published by hand) was given to a reader resumed past the final frame:
// the final frame, before the resume point, was read and dropped, and the
// stray frame, in the next sequence, was queued as the next to deliver. A
// browser's EventSource that reconnected after the stream's end
// (Last-Event-ID of the final frame) got it as an event after the end.
func TestResumePastFinalNothingAfter(t *testing.T) {
	h := startHTTP(t)
	w := h.running(t, "zz_resume_after_final")
	w.text("a")
	w.complete("a")
	w.text("stray") // sequence 2, after the final frame 1
	for _, batch := range []int{1, DefaultBatch} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := collect(t, ctx, h.nc, "zz_resume_after_final", 2, WithBatch(batch, 0))
		cancel()
		if err != nil || len(got) != 0 {
			t.Errorf("batch %d, from 2: %d frames delivered (%v), want none: the final frame 1 ended the request", batch, len(got), err)
		}
	}
	resp := h.get(t, "/v1/requests/zz_resume_after_final/stream", "Last-Event-ID", "1")
	for _, ev := range readSSE(t, resp.Body) {
		if !ev.Comment {
			t.Errorf("resumed after the final frame: event %s:%s, want none", ev.ID, ev.Event)
		}
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("resumed after the final frame: %d, want 204 (an EventSource stops reconnecting)", resp.StatusCode)
	}
}

// TestLastFrameNotJSON: a request whose last stored message is no frame
// (an integrator published bytes that are not JSON on its subject) was
// answered 500 internal by the aggregated JSON, logged as the server's
// error, where the streams answer the same message 502 invalid_frame.
func TestLastFrameNotJSON(t *testing.T) {
	h := startHTTP(t)
	w := h.running(t, "zz_last_not_json")
	w.text("a")
	publishRaw(t, h.js, "zz_last_not_json", 1, "", []byte("not a frame"), w.lastSeq)
	for _, path := range []string{"", "?wait=true", "?from=1"} {
		a := testkit.Get(t, h.srv.URL+"/v1/requests/zz_last_not_json"+path)
		if a.Status != http.StatusBadGateway || !strings.Contains(a.Body, `"code":"`+CodeInvalidFrame+`"`) {
			t.Errorf("%q: %+v, want 502 %s", path, a, CodeInvalidFrame)
		}
	}
}

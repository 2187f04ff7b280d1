package egress

import (
	"context"
	"encoding/json"
	"net/http"
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
	wantInvalidFrame(t, h, "zz_last_not_json", []testkit.Read{{Name: "json"}, {Name: "wait", Path: "?wait=true"}, {Name: "from 1", Path: "?from=1"}})
}

// TestGetAfterFinalIsDone: a request whose final frame is stored has ended,
// whatever was stored after it (by hand, by a rogue or late writer): the
// aggregated JSON answered 202 with the state "succeeded" (its status from
// the last stored message, a stray frame; its state from the final frame),
// and "pending" or "running" for a resume point past the final frame. It
// is 200 with the final frame's state, the frames past it ignored, as the
// streams ignore them (TestSSEStopsAtFinal). A resume point past the last
// stored frame: TestStrayAfterFinalNeverRunning.
func TestGetAfterFinalIsDone(t *testing.T) {
	h := startHTTP(t)
	w := h.running(t, "zz_get_after_final")
	w.text("a")
	w.complete("a")
	w.text("stray") // sequence 2, after the final frame 1
	w.text("stray") // sequence 3
	for _, c := range []struct {
		query  string
		frames int
	}{{"", 2}, {"?from=1", 1}, {"?from=2", 0}, {"?from=3", 0}, {"?wait=true", 2}, {"?wait=true&from=3", 0}} {
		resp := h.get(t, "/v1/requests/zz_get_after_final"+c.query)
		var v RequestView
		err := json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || v.State != StateSucceeded || len(v.Frames) != c.frames || v.NextSequence != 2 {
			t.Errorf("%q: %d, state %q, %d frames, next %d (%v); want 200, %s, %d frames, next 2",
				c.query, resp.StatusCode, v.State, len(v.Frames), v.NextSequence, err, StateSucceeded, c.frames)
		}
	}
}

// TestStreamResumedPastNonFrame: a stored message that is no frame (bytes
// published by hand on the request's subject) is 502 invalid_frame to
// every read that meets it; a stream resumed past it (Last-Event-ID of its
// sequence) skipped it as if read and waited for a next frame until the
// wait limit (200, then a retryable timeout: a client retries forever),
// where the aggregated JSON of the same resume point answers 502.
func TestStreamResumedPastNonFrame(t *testing.T) {
	h := startHTTP(t, WithWaitLimits(time.Second, time.Second))
	w := h.running(t, "zz_resumed_past_non_frame")
	w.text("a")
	publishRaw(t, h.js, "zz_resumed_past_non_frame", 1, "", []byte("not a frame"), w.lastSeq)
	wantInvalidFrame(t, h, "zz_resumed_past_non_frame", []testkit.Read{{Name: "sse from 2", Path: "/stream?from=2"}, {Name: "json from 2", Path: "?from=2"}})
}

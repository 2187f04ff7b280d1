package egress

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStreamHeadMatchesGetStatus: HEAD of a request's stream answers the
// status its GET answers (RFC 9110 §9.3.2): it answered 200 where GET
// answers 400 (a malformed resume point) or 204 (one past the final).
func TestStreamHeadMatchesGetStatus(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "zz_head", 2) // frames 0, 1, 2 (final)
	for _, c := range []struct {
		name string
		path string
		hdr  []string
	}{
		{"Last-Event-ID of the final frame", "/v1/requests/zz_head/stream", []string{"Last-Event-ID", "2"}},
		{"from past the final frame", "/v1/requests/zz_head/stream?from=3", nil},
		{"malformed from", "/v1/requests/zz_head/stream?from=x", nil},
		{"malformed Last-Event-ID", "/v1/requests/zz_head/stream", []string{"Last-Event-ID", "x"}},
	} {
		get := testkit.Open(t, http.MethodGet, h.srv.URL+c.path, "", c.hdr...)
		_, _ = io.Copy(io.Discard, get.Body)
		head := testkit.Open(t, http.MethodHead, h.srv.URL+c.path, "", c.hdr...)
		if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("%s: HEAD answers %d %q, GET %d %q", c.name, head.StatusCode, head.Header.Get("Content-Type"), get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
}

// TestReaderNothingAfterFinal: the reader delivers frames "to the final
// frame"; a frame stored after the final one (published by hand) was
// delivered when the same direct get batch held it.
func TestReaderNothingAfterFinal(t *testing.T) {
	e := startEnv(t)
	w := e.running(t, "zz_after_final")
	w.text("a")
	w.complete("a")
	w.text("stray") // sequence 2, after the final frame 1
	for _, batch := range []int{1, DefaultBatch} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := collect(t, ctx, e.nc, "zz_after_final", 0, WithBatch(batch, 0))
		cancel()
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if len(got) != 2 || !got[len(got)-1].IsFinal() {
			t.Errorf("batch %d: %d frames delivered, the last final=%v; want frames 0 and 1 (final)", batch, len(got), got[len(got)-1].IsFinal())
		}
	}
}

// TestSSEStopsAtFinal: an E2A SSE stream ends with the request's final
// frame; a frame stored after it is not sent as an event after the final
// one (it was; a browser would then resume from it, past the final frame).
func TestSSEStopsAtFinal(t *testing.T) {
	h := startHTTP(t)
	w := h.running(t, "zz_sse_after_final")
	w.text("a")
	w.complete("a")
	w.text("stray") // sequence 2, after the final frame 1
	resp := h.get(t, "/v1/requests/zz_sse_after_final/stream")
	var ids []string
	for _, ev := range readSSE(t, resp.Body) {
		if !ev.Comment {
			ids = append(ids, ev.ID+":"+ev.Event)
		}
	}
	if len(ids) != 2 || ids[1] != "1:"+e2a.KindComplete {
		t.Errorf("events %v, want 0:%s 1:%s and nothing after the final frame", ids, e2a.KindChunk, e2a.KindComplete)
	}
}

package httpagent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestSSELoneCRLineEnds: an SSE answer's lines may end with CRLF, LF or a
// lone CR (WHATWG HTML §9.2.5: end-of-line = ( cr lf / cr / lf ); the
// package documents SSE answers by that format, and strips its BOM per
// §9.2.6). The reader split lines on LF only: an answer with CR line ends
// was one line, and the request ended upstream_unavailable ("closed the
// answer mid-frame after 0 frames") though the agent sent both frames and
// a clean end.
func TestSSELoneCRLineEnds(t *testing.T) {
	sse := "data: " + strings.TrimSpace(chunk) + "\r\r" + "data: " + strings.TrimSpace(complete) + "\r\r"
	c, err := bridge.NewClient(upstream(t, "text/event-stream", sse))
	if err != nil {
		t.Fatal(err)
	}
	up, err := httpagent.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := &agenttest.Writer{}
	err = up.Call(ctx, &e2a.Envelope{RequestID: "q", Params: map[string]any{"text": "hi"}}, w)
	if err != nil || strings.Join(w.Kinds(), " ") != "e2a.chunk e2a.complete" {
		t.Fatalf("SSE with CR line ends: frames %v, err %v; want e2a.chunk then e2a.complete", w.Kinds(), err)
	}
}

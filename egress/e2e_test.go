package egress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// runEndToEnd: the demo agent (agent SDK, fenced frames) answers requests
// while egress streams them as E2A SSE, and replays them to the a2a-go
// client with A2A's renderers. TestEndToEndDemoAgent (a2aclient_test.go,
// package egress_test) runs it with protocols/a2a's.
func runEndToEnd(t *testing.T, rend A2ARenderers) {
	h := startHTTP(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, h.conn(t), demo.Pool, demo.New()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	env := newEnvelope("e2e_1")
	env.Params = map[string]any{"text": "hello", "frames": 3, "delay_ms": 5}
	h.submit(t, env)
	resp := h.get(t, "/v1/requests/e2e_1/stream")
	var frames []*e2a.Response
	var kinds []string
	for _, ev := range readSSE(t, resp.Body) {
		if ev.Comment {
			continue
		}
		r, err := e2a.ResponseFromJSON([]byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, r)
		k := r.ResponseKind
		if c, err := r.Chunk(); err == nil {
			k = c.DeltaKind
		}
		kinds = append(kinds, k)
	}
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, " "); got != "reasoning tool tool text text text e2a.complete" {
		t.Fatalf("kinds %s", got)
	}

	// The same request replayed to a real A2A client.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req rpcReq
		_ = decodeJSON(r, &req)
		rend.serveStream(h.svc.ServeExisting, w, r, "e2e_1", A2AParams{JSONRPCID: req.ID, TaskID: "t-e2e", ContextID: "c-e2e",
			Resubscribe: true, Interaction: true})
	}))
	defer srv.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	var text strings.Builder
	var last a2a.Event
	for ev, err := range a2aclient.NewJSONRPCTransport(srv.URL, nil).ResubscribeToTask(cctx, &a2a.TaskIDParams{ID: "t-e2e"}) {
		if err != nil {
			t.Fatal(err)
		}
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			for _, p := range au.Artifact.Parts {
				if tp, ok := p.(a2a.TextPart); ok && tp.Metadata["thought"] != true {
					text.WriteString(tp.Text)
				}
			}
		}
		last = ev
	}
	if text.String() != "You said: hello" {
		t.Fatalf("text %q", text.String())
	}
	if su, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || !su.Final || su.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("last %#v", last)
	}
}

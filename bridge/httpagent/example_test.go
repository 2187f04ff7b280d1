package httpagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// An HTTP agent behind the pool "echo", as `e2a agent --pool echo --http
// URL` serves it: each request's E2A envelope is POSTed to URL, and the
// agent's answer, E2A frames one per line (application/x-ndjson), is
// written through as the request's frames. Here the agent is an
// httptest.Server that streams back the words it heard and completes with
// their count, as examples/httpagent/agent.py does.
func Example() {
	// The HTTP agent, in any language: read the envelope, answer frames.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		env, err := e2a.FromJSON(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w) // one JSON value per line
		words := strings.Fields(env.ParamString("text"))
		for _, word := range words {
			_ = enc.Encode(map[string]any{"response_kind": "e2a.chunk", "body": map[string]any{"delta_kind": "text", "delta": word + " "}})
			w.(http.Flusher).Flush()
		}
		_ = enc.Encode(map[string]any{"response_kind": "e2a.complete", "body": map[string]any{"result": map[string]any{"words": len(words)}}})
	}))
	defer echo.Close()

	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The bridge: a client of the agent's URL, the conversations store
	// (each POST carries the session's earlier turns as "history"), and
	// bridge.New around it (retries, a bound on calls in flight).
	client, err := bridge.NewClient(echo.URL)
	if err != nil {
		panic(err)
	}
	convs, err := bridge.OpenConversations(context.Background(), mem.JetStream, mem.Config)
	if err != nil {
		panic(err)
	}
	up, err := httpagent.New(client, httpagent.WithHistory("echo", convs))
	if err != nil {
		panic(err)
	}
	h, err := bridge.New("echo", up)
	if err != nil {
		panic(err)
	}

	// Serve the pool until ctx is done.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "echo", h) }()

	// Send a request, then read its frames in order: egress.Replay waits
	// for those not written yet and returns after the final one.
	env := &e2a.Envelope{RequestID: "req-1", IsStream: true, Params: map[string]any{"text": "hello from the pipeline"}}
	if _, err := ingress.NewPublisher(mem.JetStream, 10*time.Second).Publish(ctx, "echo", env); err != nil {
		panic(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var text strings.Builder
	err = egress.Replay(rctx, mem.Conn, "req-1", 0, func(fr render.Frame) error {
		f := fr.Response
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
			text.WriteString(c.Delta.(string))
		}
		if f.IsFinal {
			fmt.Printf("streamed: %s\nfinal: %s %s %s\n", strings.TrimSpace(text.String()), f.ResponseKind, f.Status, f.Body)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// streamed: hello from the pipeline
	// final: e2a.complete succeeded {"result":{"words":4}}
	// Run: <nil>
}

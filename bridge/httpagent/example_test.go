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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
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
	srv, err := streams.StartEmbedded(streams.EmbeddedOptions{})
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	nc, _ := srv.Connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := streams.DefaultConfig()
	cfg.Storage, cfg.RequestsMaxBytes = jetstream.MemoryStorage, 64<<20
	if _, err := streams.Apply(context.Background(), js, cfg); err != nil {
		panic(err)
	}

	// The bridge: a client of the agent's URL, the conversations store
	// (each POST carries the session's earlier turns as "history"), and
	// bridge.New around it (retries, a bound on calls in flight).
	client, err := bridge.NewClient(echo.URL)
	if err != nil {
		panic(err)
	}
	convs, err := bridge.OpenConversations(context.Background(), js, cfg)
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
	go func() { done <- agent.Run(ctx, nc, "echo", h) }()

	// Follow the live frames, then send a request.
	live, _ := subjects.Live("req-1")
	frames, _ := nc.SubscribeSync(live)
	req, _ := subjects.Request("echo", "req-1")
	body, _ := json.Marshal(e2a.Envelope{RequestID: "req-1", IsStream: true, Params: map[string]any{"text": "hello from the pipeline"}})
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: req, Data: body}, jetstream.WithMsgID("req-1")); err != nil {
		panic(err)
	}
	var text strings.Builder
	for final := false; !final; {
		m, err := frames.NextMsg(10 * time.Second)
		if err != nil {
			panic(err)
		}
		// A message holds one frame, or a burst of them (E2A-Frames).
		burst, _ := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		for _, f := range burst {
			if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
				text.WriteString(c.Delta.(string))
			}
			if f.IsFinal {
				fmt.Printf("streamed: %s\nfinal: %s %s %s\n", strings.TrimSpace(text.String()), f.ResponseKind, f.Status, f.Body)
				final = true
			}
		}
	}
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// streamed: hello from the pipeline
	// final: e2a.complete succeeded {"result":{"words":4}}
	// Run: <nil>
}

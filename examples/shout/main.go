// Command shout is a complete custom agent: it streams the words of the
// request's text back in capitals and completes with the word count.
//
//	go run ./examples/shout    # next to `go run ./cmd/e2a dev`
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// Shout is the agent: one text chunk per word, then the word count.
var Shout = agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	words := strings.Fields(env.ParamString("text"))
	for _, word := range words {
		if err := w.Chunk(e2a.DeltaText, strings.ToUpper(word)+" "); err != nil {
			return err // fenced, cancelled or shutting down: the runtime takes it from here
		}
	}
	return w.Complete(map[string]any{"words": len(words)})
})

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	url := os.Getenv("E2A_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222" // the embedded server of `e2a dev`
	}
	api := os.Getenv("E2A_HTTP_ADDR") // `e2a dev`'s HTTP address, when moved off 8080
	// Port 0 is an `e2a agent`'s (the README's export beside dev): none to try.
	if api == "" || strings.HasSuffix(api, ":0") {
		api = "localhost:8080"
	} else if strings.HasPrefix(api, ":") {
		api = "localhost" + api
	}
	if err := run(ctx, url, api, "shout", slog.Default()); err != nil {
		slog.Error("shout", "err", err)
		os.Exit(1)
	}
}

// run serves pool on the NATS server at url until ctx is done; its start
// line tells how to try it on the HTTP address api.
func run(ctx context.Context, url, api, pool string, log *slog.Logger) error {
	nc, err := nats.Connect(url, nats.Name("agent-"+pool))
	if err != nil {
		return err
	}
	defer nc.Close()
	log.Info("agent serving", "pool", pool, "nats", nc.ConnectedUrl(),
		"try", "curl -N '"+api+"/v1/requests?agent="+pool+"' -H 'Accept: text/event-stream' -d '{\"params\":{\"text\":\"hi there\"}}'")
	return agent.Run(ctx, nc, pool, Shout, agent.WithConcurrency(32), agent.WithLogger(log))
}

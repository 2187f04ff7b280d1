package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/streams"
)

// runACP serves ACP over stdio (an editor spawns `e2a acp` as its agent):
// JSON-RPC on stdin/stdout, logs on stderr only. With E2A_NATS_URL it
// forwards to that pipeline; without, it starts the embedded server (on a
// free port unless E2A_NATS_PORT is set) and the demo agent in process.
// There is no HTTP auth: the local process is the trust boundary, and the
// NATS credentials gate the pipeline.
func runACP(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	pool := fs.String("pool", cfg.DefaultPool, "agent pool the prompts go to (unless E2A_ROUTES says otherwise)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := checkPoolFlag(fs, *pool); err != nil {
		return err
	}
	log, err := processLogger(cfg)
	if err != nil {
		return err
	}
	if _, set := os.LookupEnv("E2A_NATS_PORT"); !set && cfg.NatsURL == "" {
		cfg.NATSPort = 0 // several editors may each spawn one
	}
	natsEvents := streams.NewConnEvents(log)
	nc, stopNATS, _, err := connectOrEmbed(ctx, cfg, log, natsEvents)
	if err != nil {
		return err
	}
	defer stopNATS()
	reg := newRegistry(natsEvents)
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	if cfg.NatsURL == "" {
		go func() {
			agentDone <- agent.Run(agentCtx, nc, *pool, demo.New(), append(cfg.agentOptions(), agent.WithMetrics(reg), agent.WithLogger(log))...)
		}()
	} else {
		close(agentDone)
	}
	defer func() { stopAgent(); <-agentDone }()
	eg, err := egress.New(nc, egress.WithRegisterer(reg), egress.WithLogger(log), egress.WithProjections(protocols.FillProjections))
	if err != nil {
		return err
	}
	opts := []ingress.Option{
		ingress.WithDefaultPool(*pool),
		ingress.WithMaxBodyBytes(cfg.MaxBodyBytes),
		ingress.WithRegisterer(reg),
		ingress.WithLogger(log),
	}
	if cfg.Routes != "" {
		routes, err := normalizer.ParseRoutes(cfg.Routes)
		if err != nil {
			return fmt.Errorf("E2A_ROUTES: %w", err)
		}
		opts = append(opts, ingress.WithRoutes(routes))
	}
	in, err := ingress.New(nc, eg, opts...)
	if err != nil {
		return err
	}
	log.Info("acp: serving on stdio", "pool", *pool, "embedded", cfg.NatsURL == "")
	return ingress.ServeACPStdio(ctx, os.Stdin, os.Stdout, in)
}

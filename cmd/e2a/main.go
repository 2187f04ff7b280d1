// Command e2a is the E2A Pipeline binary: one process can run every stage
// (`e2a dev`), or one stage each against an external NATS cluster.
//
// It is thin on purpose: configuration, wiring and subcommands; the logic
// lives in the packages of the module.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `e2a — the E2A Pipeline

Usage:
  e2a dev                   run everything in one process on an embedded JetStream server
  e2a serve                 run ingress and egress against E2A_NATS_URL
  e2a agent --pool NAME     run a built-in agent pool (demo) against E2A_NATS_URL
  e2a acp [--pool NAME]     an ACP agent on stdio for editors (E2A_NATS_URL, or embedded + demo agent)
  e2a streams apply         create or update streams and KV buckets on E2A_NATS_URL
  e2a replay [ID...]        print requests and frames from the durable streams, check invariants (-h for filters)
  e2a tail                  follow live requests and frames on E2A_NATS_URL
  e2a publish [FILE|-]      publish envelopes straight onto the request subjects (--follow for frames)
  e2a bench [flags]         load benchmark: the whole pipeline in process, or --target URL (-h for flags)
  e2a help                  this text

Configuration comes from E2A_* environment variables (see README).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "e2a:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cfg, err := LoadConfig()
	if err != nil {
		return err
	}
	switch args[0] {
	case "dev":
		return runDev(ctx, cfg, args[1:])
	case "serve":
		return runServe(ctx, cfg, args[1:])
	case "agent":
		return runAgent(ctx, cfg, args[1:])
	case "acp":
		return runACP(ctx, cfg, args[1:])
	case "streams":
		return runStreams(ctx, cfg, args[1:])
	case "replay":
		return runReplay(ctx, cfg, args[1:], os.Stdout, os.Stderr)
	case "tail":
		return runTail(ctx, cfg, args[1:], os.Stdout, os.Stderr)
	case "publish":
		return runPublish(ctx, cfg, args[1:], os.Stdin, os.Stdout, os.Stderr)
	case "bench":
		return runBench(ctx, cfg, args[1:])
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return errUsage
}

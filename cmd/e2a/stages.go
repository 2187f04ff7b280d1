package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/agent/tck"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// runServe runs ingress and egress (stateless, any number of replicas).
func runServe(ctx context.Context, cfg Config, args []string) error {
	if err := parseFlags(flag.NewFlagSet("serve", flag.ContinueOnError), args, 0); err != nil {
		return err
	}
	if _, err := checkHTTPConfig(cfg, false); err != nil {
		return err
	}
	log, nc, reg, stop, err := startNATSStage(ctx, cfg, "serve", "use `e2a dev` for an embedded server")
	if err != nil {
		return err
	}
	defer stop()
	// The workflow REST API validates and describes capabilities here; the
	// executions themselves run on the workflow pool (`e2a agent --pool
	// workflow`), which owns StoreData's buckets.
	wf, err := newWorkflowValidator(cfg, log)
	if err != nil {
		return err
	}
	_, stopMetrics, err := serveMetrics(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	pushAPI, err := pushStoreOptions(ctx, nc, cfg, false)
	if err != nil {
		return err
	}
	srv, err := newHTTP(ctx, &cfg, nc, reg, log, "", append(pushAPI, ingress.WithWorkflow(wf))...)
	if err != nil {
		return err
	}
	ln, err := listenHTTP(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	pushDone := make(chan error, 1)
	on, err := startPush(ctx, nc, cfg, false, reg, log, pushDone)
	if err != nil {
		return err
	}
	stages := 0
	if on {
		stages = 1
	}
	log.Info("serving", "addr", ln.Addr().String())
	return serveUntil(ctx, srv, ln, log, pushDone, stages, agent.DefaultDrainTimeout, nil)
}

// checkPoolFlag refuses a --pool no subject can hold as a bad argument
// (exit 2, with the command's help), before NATS is started or an
// upstream called: it was refused only then, by the subjects' or an
// option's words ("history needs a pool").
func checkPoolFlag(fs *flag.FlagSet, pool string) error {
	if subjects.ValidatePool(pool) == nil {
		return nil
	}
	return usageError(fs, fmt.Sprintf("--pool %q: an agent pool is 1 to 64 letters, digits, - and _", pool))
}

// builtinAgentPools are the pools `e2a agent` serves with an agent of its
// own (no upstream): the one list that `e2a help`, `e2a agent -h`, --pool's
// usage and the refusal of any other pool without an upstream name (the
// help said "demo, workflow" while tck and tck-basic ran too).
var builtinAgentPools = []string{demo.Pool, tck.Pool, tck.BasicPool, workflow.Pool}

// noBuiltinAgent is the refusal of pool, which has no built-in agent and
// was given no upstream.
func noBuiltinAgent(pool string) string {
	return fmt.Sprintf("no built-in agent for pool %q (built-in: %s; or give an upstream: --a2a, --openai, --http)", pool, strings.Join(builtinAgentPools, ", "))
}

// bridgeConcurrency is a bridge worker's concurrency: conc, at most u's
// bound on in-flight upstream calls. A bridge worker takes no more
// requests than it may call its upstream with: one over the bound would
// wait for a slot (the runtime keeping it alive) while another worker
// idles.
func bridgeConcurrency(conc int, u UpstreamConfig) int {
	if u.MaxInFlight > 0 && u.MaxInFlight < conc {
		return u.MaxInFlight
	}
	return conc
}

// runAgent runs one built-in agent pool against E2A_NATS_URL, with
// /metrics, /healthz and /readyz on E2A_HTTP_ADDR (/metrics on
// E2A_METRICS_ADDR instead when set).
func runAgent(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	pool := fs.String("pool", demo.Pool, "agent pool to serve: a built-in one ("+strings.Join(builtinAgentPools, ", ")+"), or any name with an upstream")
	concurrency := fs.Int("concurrency", 64, "requests handled at once (a bridge worker: at most E2A_UPSTREAM_MAX_IN_FLIGHT)")
	ackWait := fs.Duration("ack-wait", cfg.AgentAckWait, "how long a request may go without this worker's heartbeat before another worker takes it over (default E2A_AGENT_ACK_WAIT, else 4s; at least 1s; every worker of a pool must use the same)")
	var bf bridgeFlags
	bf.register(fs)
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := checkPoolFlag(fs, *pool); err != nil {
		return err
	}
	if *ackWait != 0 && *ackWait < time.Second {
		return usageError(fs, fmt.Sprintf("--ack-wait %v: at least 1s", *ackWait))
	}
	// Refused here, by the runtime's own check, before the upstream is
	// probed or the pool's card published: Run would refuse it only then.
	if err := agent.CheckOptions(agent.WithConcurrency(*concurrency)); err != nil {
		return usageError(fs, fmt.Sprintf("--concurrency %d: %v", *concurrency, err))
	}
	workerID := cfg.AgentWorkerID
	if workerID == "" {
		workerID = uuid.NewString()
	}
	if err := emptyUpstreamFlag(fs); err != nil {
		return err
	}
	up, err := bf.upstream(cfg.Upstream)
	if err != nil && !errors.Is(err, errNoUpstream) {
		return usageError(fs, err.Error())
	}
	bridged := err == nil
	if !bridged && !slices.Contains(builtinAgentPools, *pool) {
		// A bad argument, said before NATS or the listener start.
		return usageError(fs, noBuiltinAgent(*pool))
	}
	conc := *concurrency
	if bridged {
		conc = bridgeConcurrency(conc, up)
	}
	runOpts := []agent.Option{agent.WithConcurrency(conc), agent.WithWorkerID(workerID), agent.WithDrainTimeout(cfg.AgentDrainTimeout)}
	if *ackWait != 0 {
		runOpts = append(runOpts, agent.WithAckWait(*ackWait))
	}
	if cfg.AgentDeadline > 0 {
		runOpts = append(runOpts, agent.WithDefaultDeadline(cfg.AgentDeadline))
	}
	log, nc, natsEvents, stop, err := startStage(ctx, cfg, "e2a-agent")
	if err != nil {
		return err
	}
	defer stop()
	reg := newRegistry(natsEvents)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// Listening first: a port taken stops the worker before a bridge
	// pool's card is published for a pool no worker serves.
	ops, err := listenOps(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	defer ops.close()
	var h agent.Handler
	switch {
	case bridged:
		if h, err = newBridge(ctx, js, cfg, *pool, up, reg, log); err != nil {
			return fmt.Errorf("pool %s: %w", *pool, err)
		}
	case *pool == demo.Pool:
		h = demo.New()
	case *pool == tck.Pool:
		if h, err = tck.New(); err != nil {
			return err
		}
	case *pool == tck.BasicPool:
		if h, err = tck.New(); err != nil {
			return err
		}
		info := tck.BasicPoolInfo() // no streaming, the TCK's extension required
		if err := publishDevPools(ctx, js, cfg, []devPool{{name: *pool, h: h, info: &info}}, log); err != nil {
			return err
		}
	case *pool == workflow.Pool:
		if h, err = newWorkflowExecutor(ctx, js, cfg, log); err != nil {
			return err
		}
	default:
		return errors.New(noBuiltinAgent(*pool))
	}
	mux := http.NewServeMux()
	mountOps(mux, cfg, newOpsMux(reg, nc, js, agentNeeds(*pool, bridged)))
	return ops.serve(ctx, cfg, mux, log, func() error {
		return agent.Run(ctx, nc, *pool, h, append(runOpts, agent.WithMetrics(reg), agent.WithLogger(log))...)
	}, "agent pool running", "pool", *pool, "worker", workerID)
}

// runStreams provisions (or checks) the streams on E2A_NATS_URL.
func runStreams(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	if err := parseFlags(fs, args, -1); err != nil {
		return err
	}
	if fs.Arg(0) != "apply" {
		if fs.NArg() > 0 {
			return usageError(fs, fmt.Sprintf("unknown action %q", fs.Arg(0)))
		}
		return usageError(fs, "missing action")
	}
	if err := parseFlags(fs, fs.Args()[1:], 0); err != nil {
		return err
	}
	if cfg.NatsURL == "" {
		return errors.New("streams apply needs E2A_NATS_URL")
	}
	nc, err := connectNATS(ctx, cfg.ConnConfig, commandConnEvents().Options()...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	sc := cfg.StreamsConfig()
	rep, err := streams.Apply(ctx, js, sc, provisioned(sc, true)...)
	fmt.Println(rep.String())
	return err
}

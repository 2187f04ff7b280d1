package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

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
// It holds a stage's NATS credentials, so the pipeline's auth (E2A_API_KEYS,
// E2A_AUTH_*, …, as e2a serve reads them) applies to it too: under auth
// that is not open it acts as the principal of the editor's credential
// (acpCredential), checked at start and for each message.
func runACP(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	pool := fs.String("pool", cfg.DefaultPool, "agent pool the prompts go to (unless E2A_ROUTES says otherwise; with an upstream, default "+devBridgePool+")")
	var bf bridgeFlags
	bf.register(fs)
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	up, err := flagUpstream(fs, bf, cfg)
	if err != nil {
		return err
	}
	if up != nil && cfg.NatsURL != "" {
		return usageError(fs, "an upstream (--a2a, --openai, --http) serves the prompts in this process, on its embedded server: without E2A_NATS_URL "+
			"(beside a pipeline, run `e2a agent --pool P` with the upstream and `e2a acp --pool P`)")
	}
	if up != nil && !flagSet(fs, "pool") {
		*pool = devBridgePool
	}
	if err := checkPoolFlag(fs, *pool); err != nil {
		return err
	}
	log, err := processLogger(cfg)
	if err != nil {
		return err
	}
	auth, err := ingress.LoadAuth(os.Getenv)
	if err != nil {
		return err
	}
	serveCtx, principal, err := acpCredential(ctx, auth, os.Getenv)
	if err != nil {
		return err
	}
	if auth.Open() && (os.Getenv(envACPAPIKey) != "" || os.Getenv(envACPBearerToken) != "") {
		log.Warn("acp: the pipeline's auth is open (no E2A_API_KEYS, E2A_AUTH_*…): the editor's credential is not used, prompts are anonymous",
			"variables", credentialVar(os.Getenv))
	}
	if _, set := os.LookupEnv("E2A_NATS_PORT"); !set && cfg.NatsURL == "" {
		cfg.NATSPort = 0 // several editors may each spawn one
	}
	natsEvents := streams.NewConnEvents(log)
	nc, stopNATS, _, err := connectOrEmbed(ctx, cfg, log, natsEvents, false)
	if err != nil {
		return err
	}
	defer stopNATS()
	reg := newRegistry(natsEvents)
	h, runOpts, err := acpAgent(ctx, cfg, nc, *pool, up, reg, log)
	if err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	if h != nil {
		go func() {
			agentDone <- agent.Run(agentCtx, nc, *pool, h, append(runOpts, agent.WithMetrics(reg), agent.WithLogger(log))...)
		}()
	} else {
		close(agentDone)
	}
	defer func() { stopAgent(); <-agentDone }()
	eg, err := egress.New(nc, egress.WithRegisterer(reg), egress.WithLogger(log), egress.WithProjections(protocols.FillProjections),
		cfg.streamWaitLimits())
	if err != nil {
		return err
	}
	opts := []ingress.Option{
		ingress.WithDefaultPool(*pool),
		ingress.WithMaxBodyBytes(cfg.MaxBodyBytes),
		ingress.WithRegisterer(reg),
		ingress.WithLogger(log),
		ingress.WithAuth(auth),
		ingress.WithMaxWaitingTurns(cfg.MaxWaitingTurns),
	}
	if cfg.Routes != "" {
		routes, err := normalizer.ParseRoutes(cfg.Routes)
		if err != nil {
			return fmt.Errorf("E2A_ROUTES: %w", err)
		}
		opts = append(opts, ingress.WithRoutes(routes))
	}
	if h == nil && !cfg.AcceptUnknownPools {
		// Forwarding to a pipeline, a pool no worker ever started on (a
		// typo in the editor's --pool) is refused as e2a serve refuses
		// it, not a prompt that waits for ever. The pool run in this
		// process is known from its start (its consumer is created as
		// the agent starts: no check, which could refuse the first prompt).
		opts = append(opts, ingress.WithPoolCheck(0))
	}
	in, err := ingress.New(nc, eg, opts...)
	if err != nil {
		return err
	}
	log.Info("acp: serving on stdio", "pool", *pool, "embedded", cfg.NatsURL == "", "principal", principal)
	return ingress.ServeACPStdio(serveCtx, os.Stdin, os.Stdout, in)
}

// acpAgent is the agent `e2a acp` runs in its process, with its run
// options: none when it forwards to a pipeline (E2A_NATS_URL), the
// upstream's bridge when one is given (checked here, before the editor is
// answered: a refusal ends the command as it ends `e2a agent`), else the
// demo agent.
func acpAgent(ctx context.Context, cfg Config, nc *nats.Conn, pool string, up *UpstreamConfig, reg prometheus.Registerer, log *slog.Logger) (agent.Handler, []agent.Option, error) {
	runOpts := cfg.agentOptions()
	switch {
	case cfg.NatsURL != "":
		return nil, nil, nil
	case up == nil:
		return demo.New(), runOpts, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	h, err := newBridge(ctx, js, cfg, pool, *up, reg, log)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", pool, err)
	}
	return h, append(runOpts, agent.WithConcurrency(bridgeConcurrency(agent.DefaultConcurrency, *up))), nil
}

// The editor's credential for `e2a acp` under the pipeline's auth, in the
// environment the editor spawns it with.
const (
	envACPAPIKey      = ingress.EnvACPAPIKey
	envACPBearerToken = ingress.EnvACPBearerToken
)

// credentialVar names the variables of the editor's credential that are set.
func credentialVar(getenv func(string) string) string {
	var set []string
	for _, v := range []string{envACPAPIKey, envACPBearerToken} {
		if getenv(v) != "" {
			set = append(set, v)
		}
	}
	return strings.Join(set, ",")
}

// acpCredential returns ctx carrying the editor's credential
// (E2A_ACP_API_KEY or E2A_ACP_BEARER_TOKEN) for the stdio door when auth
// is not open, and the name of its principal, which it authenticates
// once here: a missing, doubled or refused credential is an error naming
// the variables, never quoting the secret. Under open auth (the default)
// the stdio door stays anonymous ("" principal) and a credential given
// is ignored.
func acpCredential(ctx context.Context, auth *ingress.Auth, getenv func(string) string) (context.Context, string, error) {
	key, token := strings.TrimSpace(getenv(envACPAPIKey)), strings.TrimSpace(getenv(envACPBearerToken))
	if auth.Open() {
		return ctx, "", nil
	}
	var h http.Header
	from := envACPAPIKey
	switch {
	case key == "" && token == "":
		return nil, "", fmt.Errorf("the pipeline's auth is on (schemes %s): set %s (an API key) or %s (a bearer or OAuth 2.0 access token) "+
			"to the editor's credential; e2a acp acts as its principal", strings.Join(auth.Schemes(), ","), envACPAPIKey, envACPBearerToken)
	case key != "" && token != "":
		return nil, "", fmt.Errorf("set one of %s and %s, not both", envACPAPIKey, envACPBearerToken)
	case key != "":
		h = http.Header{ingress.HeaderAPIKey: {key}}
	default:
		h, from = http.Header{"Authorization": {"Bearer " + token}}, envACPBearerToken
	}
	p, err := auth.AuthenticateHeader(h)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", from, err)
	}
	ctx, err = ingress.WithStdioCredential(ctx, h)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", from, err)
	}
	return ctx, p.UserID, nil
}

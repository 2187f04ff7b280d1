package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/redact"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// runDev runs the embedded server (unless E2A_NATS_URL is set), provisions
// the streams, and serves ingress, egress and the demo agent in one process.
func runDev(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var df devBridgeFlags
	df.register(fs)
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	up, err := df.upstream(fs, cfg)
	if err != nil {
		return err
	}
	log, err := processLogger(cfg)
	if err != nil {
		return err
	}
	logMemoryLimit(cfg, log)
	// Both ports first, before anything starts: a taken port is said at
	// once, with the variable that moves it.
	ln, err := listenHTTP(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if up != nil && ownAddress(up.URL, ln.Addr()) {
		return usageError(fs, fmt.Sprintf("--%s %s is this e2a dev's own address (E2A_HTTP_ADDR %s): the pipeline would be its own agent; "+
			"start the agent elsewhere, or e2a dev on another address", up.Kind, redact.URL(up.URL), ln.Addr()))
	}
	if err := checkNATSPort(cfg); err != nil {
		return err
	}
	credential, err := checkHTTPConfig(cfg, true)
	if err != nil {
		return err
	}
	natsEvents := streams.NewConnEvents(log)
	nc, stopNATS, natsURL, err := connectOrEmbed(ctx, cfg, log, natsEvents, true)
	natsURL = streams.RedactURLs(natsURL) // printed and logged: no credentials
	if err != nil {
		return err
	}
	defer stopNATS()
	stopTracing, err := startTracing(ctx, log, "e2a-dev")
	if err != nil {
		return err
	}
	defer stopTracing()
	reg := newRegistry(natsEvents)
	metricsAddr, stopMetrics, err := serveMetrics(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	pools, err := df.pools(ctx, js, &cfg, up, reg, log)
	if err != nil {
		return err
	}
	wf, err := newWorkflowExecutor(ctx, js, cfg, log)
	if err != nil {
		return err
	}
	pushAPI, err := pushStoreOptions(ctx, nc, cfg, true)
	if err != nil {
		return err
	}
	srv, err := newHTTP(ctx, &cfg, nc, reg, log, demoPoolOf(pools, cfg.DefaultPool), append(pushAPI, ingress.WithWorkflow(wf))...)
	if err != nil {
		return err
	}
	if err := publishDevPools(ctx, js, cfg, pools, log); err != nil {
		return err
	}
	agentDone := make(chan error, 3+len(pools)) // the pools, workflow, push, the archiver
	agents, err := startDevStages(ctx, nc, cfg, pools, wf, reg, log, agentDone)
	if err != nil {
		return err
	}
	waitDevPools(ctx, js, pools, log)
	base := "http://" + ln.Addr().String()
	metrics := base
	if metricsAddr != "" {
		metrics = "http://" + metricsAddr
	}
	fmt.Fprintf(os.Stdout, `E2A Pipeline (dev) is running.
  HTTP       %s   (POST /v1/requests, /a2a, /a2a/v1, /acp, /a2e, /api/v1/workflows/*)
  console    %s/console
  agent card %s/.well-known/agent-card.json%s
  metrics    %s/metrics   health %s/healthz   ready %s/readyz
  NATS       %s   (JetStream; subjects e2a.req.>, e2a.resp.>, e2a.live.>)%s%s
  agent pools %s and "workflow" (A2E workflows)%s
Try:
  curl -N %s/v1/requests -H 'Accept: text/event-stream'%s -d '{"params":{"text":"hello"}}'
Ctrl-C stops.
`, base, base, base, grpcLine(cfg), metrics, base, base, natsURL, storeLine(cfg), openNATSLine(cfg, credential), poolsLine(pools), archiveLine(cfg), base, credential)
	log.Info("serving", "addr", ln.Addr().String(), "nats", natsURL) // as e2a serve logs it, for tools that read the log
	return serveUntil(ctx, srv, ln, log, agentDone, agents, cfg.AgentDrainTimeout, nil)
}

// startDevStages starts dev's background stages, each sending its end on
// done: the push stage (unless E2A_PUSH is api or off), the archiver
// (with E2A_ARCHIVE=true), the agent pools and the workflow pool,
// all with the process's registry and logger. It returns how many it
// started (serveUntil waits for them all on shutdown).
func startDevStages(ctx context.Context, nc *nats.Conn, cfg Config, pools []devPool, wf *workflow.Executor,
	reg *prometheus.Registry, log *slog.Logger, done chan<- error) (int, error) {
	pushOn, err := startPush(ctx, nc, cfg, true, reg, log, done)
	if err != nil {
		return 0, err
	}
	stages := len(pools) + 1 // and the workflow pool
	if pushOn {
		stages++
	}
	if startArchive(ctx, nc, cfg, reg, log, done) {
		stages++
	}
	for _, p := range pools {
		go func() {
			done <- agent.Run(ctx, nc, p.name, p.h, append(append(cfg.agentOptions(), p.opts...), agent.WithMetrics(reg), agent.WithLogger(log))...)
		}()
	}
	go func() {
		done <- agent.Run(ctx, nc, workflow.Pool, wf, append(cfg.agentOptions(), agent.WithMetrics(reg), agent.WithLogger(log), agent.WithWorkerID("dev-workflow"))...)
	}()
	return stages, nil
}

// devPoolsWait bounds waitDevPools.
const devPoolsWait = 15 * time.Second

// waitDevPools waits until every pool of `e2a dev` (and the workflow pool)
// has its consumer on E2A_REQUESTS, which agent.Run creates before it
// serves, so that a request sent once the banner is printed finds its
// pool known instead of "unknown agent pool". A pool whose consumer is
// not there within devPoolsWait is logged (its agent's error, if any, ends
// the process through serveUntil).
func waitDevPools(ctx context.Context, js jetstream.JetStream, pools []devPool, log *slog.Logger) {
	names := []string{workflow.Pool}
	for _, p := range pools {
		names = append(names, p.name)
	}
	wctx, cancel := context.WithTimeout(ctx, devPoolsWait)
	defer cancel()
	for _, name := range names {
		consumer, err := streams.AgentConsumerName(name)
		if err != nil {
			continue
		}
		for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
			if _, err := js.Consumer(wctx, streams.RequestsStream, consumer); err == nil {
				break
			}
			if sleepctx.Sleep(wctx, wait) != nil {
				log.Warn("agent pool not consuming yet", "pool", name, "waited", devPoolsWait.String())
				return
			}
		}
	}
}

// connectNATS connects to E2A_NATS_URL (cc.NatsURL); its error names the
// variable and the URL, credentials redacted, where nats.go's alone ("no
// servers available for connection") names neither, and when no server
// answers, where a URL beside e2a dev comes from.
func connectNATS(ctx context.Context, cc streams.ConnConfig, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := streams.Connect(ctx, cc, opts...)
	if errors.Is(err, nats.ErrNoServers) {
		// Nothing listens there: the usual cause beside e2a dev is a URL
		// other than the one it printed, or e2a dev stopped.
		return nil, fmt.Errorf("connect to E2A_NATS_URL=%s: no NATS server answers there (is e2a dev running? it prints its NATS URL at start): %w",
			streams.RedactURLs(cc.NatsURL), err)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to E2A_NATS_URL=%s: %w", streams.RedactURLs(cc.NatsURL), err)
	}
	return nc, nil
}

// commandConnEvents is the ConnEvents of an operator command (replay,
// tail, publish, streams apply, push dead and redeliver): its output is the answer, so a
// lost connection or a refused read is said on stderr, as text, warnings
// and errors only.
func commandConnEvents() *streams.ConnEvents {
	return streams.NewConnEvents(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// drainWithin bounds drainWait at shutdown.
const drainWithin = 10 * time.Second

// drainWait drains nc (its subscriptions' pending messages handled, its
// publishes flushed) and waits until it is closed, at most within, then
// closes it. Drain alone returns at once: the embedded server shut down
// right after it cut the connection short (the client's EOF, logged as a
// closed connection's error), and a process exiting right after it could
// leave the last publishes unsent. A drain that cannot start (the
// connection is reconnecting: what it buffered is dropped) or does not end
// within is said on log, then the connection is closed.
func drainWait(nc *nats.Conn, within time.Duration, log *slog.Logger) {
	closed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(closed)
	if err := nc.Drain(); err != nil {
		if !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("NATS connection closed without draining: publishes not yet sent are dropped", "err", err)
		}
		nc.Close()
		return
	}
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		log.Warn("NATS connection not drained in time: closed", "within", within)
		nc.Close()
	}
}

// connectOrEmbed connects to E2A_NATS_URL, or starts the embedded server, and
// provisions streams in both cases; with push (e2a dev, which runs the push
// stage), on the embedded server, the push stage's too (provisioned). The
// connection's events (lost, restored, a subscription dropping messages, a
// permissions violation) go to ev, which logs and counts them (newRegistry
// exposes the counts).
func connectOrEmbed(ctx context.Context, cfg Config, log *slog.Logger, ev *streams.ConnEvents, push bool) (*nats.Conn, func(), string, error) {
	var nc *nats.Conn
	var url string
	stop := func() {}
	// The GC target of a long-running process, the server in it or not
	// (defaultGCPercent: the stages alone gain from it too).
	if pct := gcDefault(); pct > 0 {
		log.Debug("GC target (GOGC unset)", "GOGC", pct)
	}
	if cfg.NatsURL != "" {
		c, err := connectNATS(ctx, cfg.ConnConfig, ev.Options()...)
		if err != nil {
			return nil, nil, "", err
		}
		nc, url = c, cfg.NatsURL
		stop = func() { drainWait(nc, drainWithin, log) }
	} else {
		// A taken port or an unusable store is said at once, naming its
		// variable: the server would wait for its listener 10 s, then
		// blame the port.
		if err := checkNATSPort(cfg); err != nil {
			return nil, nil, "", err
		}
		if err := checkStoreDir(cfg.StoreDir); err != nil {
			return nil, nil, "", err
		}
		unlock := func() {}
		if cfg.StoreDir != "" {
			u, err := lockStoreDir(cfg.StoreDir)
			if err != nil {
				return nil, nil, "", err
			}
			unlock = u
		}
		// max_payload as the production servers (deploy/nats): 8 MiB, above
		// the default E2A_MAX_BODY_BYTES (4 MiB), so what ingress accepts fits.
		emb, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: cfg.StoreDir, Port: cfg.NATSPort, SyncAlways: cfg.SyncAlways,
			MaxPayload: embeddedMaxPayload})
		if err != nil {
			unlock()
			return nil, nil, "", fmt.Errorf("embedded NATS (E2A_NATS_PORT=%d; set 0 for a random port): %w", cfg.NATSPort, err)
		}
		c, err := emb.Connect(ev.Options()...)
		if err != nil {
			emb.Shutdown()
			unlock()
			return nil, nil, "", err
		}
		nc, url = c, emb.ClientURL()
		stop = func() { drainWait(nc, drainWithin, log); emb.Shutdown(); unlock() }
	}
	js, err := jetstream.New(nc)
	if err != nil {
		stop()
		return nil, nil, "", err
	}
	rep, err := streams.Apply(ctx, js, cfg.StreamsConfig(), provisioned(cfg.StreamsConfig(), push && cfg.NatsURL == "")...)
	if err != nil {
		stop()
		return nil, nil, "", fmt.Errorf("provision streams: %w", err)
	}
	for _, c := range rep.Changes {
		level := slog.LevelDebug
		if c.Action != streams.ActionUnchanged {
			level = slog.LevelInfo
		}
		attrs := []any{"kind", c.Kind, "name", c.Name, "action", c.Action}
		if len(c.Drift) > 0 {
			attrs = append(attrs, "drift", c.Drift)
		}
		log.Log(ctx, level, "provisioned", attrs...)
	}
	return nc, stop, url, nil
}

// provisioned is what Apply provisions besides the streams and buckets of
// sc: the console's index and, with push, the push stage's E2A_PUSH and
// E2A_PUSH_DEAD. `e2a streams apply` provisions them all, and so does e2a
// dev on its embedded server: the push stage creates its bucket and stream
// when they are missing but never updates them, so a store kept across an
// upgrade (E2A_STORE_DIR) kept an earlier build's E2A_PUSH, unbounded
// (TestEmbeddedStoreUpgradesPush). Against E2A_NATS_URL a stage leaves them
// to `e2a streams apply`: its NATS user may not read them (an agent pool's
// cannot).
func provisioned(sc streams.Config, push bool) []streams.ApplyOption {
	opts := []streams.ApplyOption{streams.WithStream(console.IndexStreamConfig(sc, 0))}
	if push {
		opts = append(opts, streams.WithKeyValue(sc.PushBucketConfig()), streams.WithStream(sc.PushDeadStreamConfig()))
	}
	return opts
}

// defaultGCPercent is the GC target (GOGC) of e2a's long-running
// processes (dev, acp, serve, agent, push, archive; bench in process) when
// GOGC is not set.
//
// A process that embeds the NATS server (e2a dev, e2a bench in process)
// keeps the server's state per stored subject: long-lived, pointer-rich heap
// that every GC cycle marks again, a larger share the fuller the streams.
// Measured (README, Soak: two pairs of soaks at 1,500 A2A requests/s): 10–25 %
// less CPU per request once the streams are full, and TTFF p50 ≈ 1 ms instead
// of spikes to 20–530 ms, for up to ≈ 35 % more RSS.
//
// The stages alone (e2a serve, e2a agent) have small heaps that are mostly
// per-request garbage, so a cycle costs little to mark and fewer cycles
// mean less CPU: measured with `e2a bench --replicas 1 --rates 1154,2000`
// (five pairs, A2A message/stream, README "Configuration"), serve's CPU
// per request 0.431–0.464 → 0.401–0.419 ms at 1,154 requests/s and the
// agent's 0.107–0.118 → 0.086–0.097 ms closed loop, lower in every pair,
// for peak RSS 48–60 → 57–71 MiB (serve). Deployments bound the heap with
// Go's memory limit (deploy/k8s gives the container's limit as
// E2A_MEMORY_LIMIT, and the process sets 90 % of it: applyMemoryLimit),
// which the collector honours before the GOGC target.
const defaultGCPercent = 200

// gcDefault sets defaultGCPercent unless the GOGC variable is set, and
// returns the percent it set (0: GOGC rules).
func gcDefault() int {
	if os.Getenv("GOGC") != "" {
		return 0
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

// embeddedMaxPayload is the embedded server's max_payload.
const embeddedMaxPayload = 8 << 20

// listenHTTP listens on addr, or says which variable moves a taken port.
func listenHTTP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("HTTP address %s is already in use (another e2a dev?): set E2A_HTTP_ADDR to another, "+
				"e.g. E2A_HTTP_ADDR=%s, or 127.0.0.1:0 (any free port) for an e2a agent beside e2a dev", addr, freePortAfter(addr))
		}
		return nil, fmt.Errorf("listen on E2A_HTTP_ADDR=%s: %w", addr, err)
	}
	return ln, nil
}

// freePortAfter is the address a taken addr suggests: addr's host with the
// first of the 100 ports after its own that is free now (the one after,
// when none is; 127.0.0.1:8081 when addr has no numeric port). The port
// after alone was often taken too: a second `e2a dev` on 8081.
func freePortAfter(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n <= 0 || n >= 65535 {
		return "127.0.0.1:8081"
	}
	if host == "" {
		host = "127.0.0.1"
	}
	for p := n + 1; p <= min(n+100, 65535); p++ {
		a := net.JoinHostPort(host, strconv.Itoa(p))
		if ln, err := net.Listen("tcp", a); err == nil {
			ln.Close()
			return a
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// checkStoreDir makes the embedded server's store directory dir ("": a
// temporary one, made by the server), or says why it cannot be one.
func checkStoreDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("E2A_STORE_DIR=%s is not a directory: set it to a directory for the embedded server's store", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("E2A_STORE_DIR=%s cannot be made: %w", dir, err)
	}
	return nil
}

// checkNATSPort tells at once when the embedded server's port is taken.
// When a NATS server holds it (isNATSServer), it names both ways out:
// E2A_NATS_URL to use the server already there (what `e2a agent` and `e2a
// acp` beside `e2a dev` want: an embedded server on another port would be
// a pipeline of their own, whose pools `e2a dev` never sees), or
// E2A_NATS_PORT for another embedded one. When something else holds it
// (another program's listener), only E2A_NATS_PORT: E2A_NATS_URL would
// name a server that is not there.
func checkNATSPort(cfg Config) error {
	if cfg.NatsURL != "" || cfg.NATSPort == 0 {
		return nil
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.NATSPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if !errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("embedded NATS on %s: %w", addr, err)
		}
		if isNATSServer(addr) {
			return fmt.Errorf("NATS port %d is already in use by a NATS server (another e2a dev or nats-server?): to use that server, set E2A_NATS_URL=nats://%s; "+
				"to run another embedded one, set E2A_NATS_PORT to another port, or 0 for a random one", cfg.NATSPort, addr)
		}
		return fmt.Errorf("NATS port %d is already in use by something that does not answer as a NATS server (no INFO line within %s): "+
			"set E2A_NATS_PORT to another port, or 0 for a random one", cfg.NATSPort, natsProbeTimeout)
	}
	return ln.Close()
}

// natsProbeTimeout bounds isNATSServer: a NATS server writes its INFO line
// as soon as it accepts a connection.
const natsProbeTimeout = 2 * time.Second

// isNATSServer says whether what listens on addr answers as a NATS server:
// the first line it writes on a new connection is the protocol's INFO, a
// JSON object with the server's id.
func isNATSServer(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, natsProbeTimeout)
	if err != nil {
		return false
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(natsProbeTimeout)); err != nil {
		return false
	}
	line, err := bufio.NewReader(io.LimitReader(conn, 1<<16)).ReadString('\n')
	if err != nil {
		return false
	}
	info, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	var v struct {
		ServerID string `json:"server_id"`
	}
	return ok && json.Unmarshal([]byte(info), &v) == nil && v.ServerID != ""
}

// newHTTP builds the HTTP server of ingress + egress + console + operations
// endpoints. demoPool, when set, gives the console a demo-request form.
func newHTTP(ctx context.Context, cfg *Config, nc *nats.Conn, reg *prometheus.Registry, log *slog.Logger, demoPool string, extra ...ingress.Option) (*http.Server, error) {
	// One Auth for every door, the console's included: its failure limiter
	// counts a client's refused credentials wherever they are tried.
	limit, err := cfg.authLimit()
	if err != nil {
		return nil, err
	}
	auth, err := ingress.LoadAuth(os.Getenv, ingress.WithAuthLimit(limit), ingress.WithAuthRegisterer(reg))
	if err != nil {
		return nil, err
	}
	eopts := []egress.Option{egress.WithRegisterer(reg), egress.WithLogger(log), egress.WithProjections(protocols.FillProjections),
		egress.WithAuthorizer(egressAuthorizer(auth)), cfg.streamWaitLimits()}
	hopts, err := historyOptions(*cfg, nc)
	if err != nil {
		return nil, err
	}
	eg, err := egress.New(nc, append(eopts, hopts...)...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	opts, err := ingressOptions(ctx, js, *cfg, auth)
	if err != nil {
		return nil, err
	}
	var grpcLn net.Listener
	if cfg.GRPCAddr != "" {
		if grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			return nil, fmt.Errorf("E2A_GRPC_ADDR: %w", err)
		}
		// The port it took (E2A_GRPC_ADDR=…:0 picks one), for the card and
		// the banner.
		cfg.GRPCAddr = grpcLn.Addr().String()
		opts = append(opts, ingress.WithA2AGRPCAddress(cfg.GRPCAddr))
	}
	opts = append(opts,
		ingress.WithDefaultPool(cfg.DefaultPool),
		ingress.WithMaxBodyBytes(cfg.MaxBodyBytes),
		ingress.WithPublicURL(cfg.PublicURL),
		ingress.WithRegisterer(reg),
		ingress.WithLogger(log))
	in, err := ingress.New(nc, eg, append(opts, extra...)...)
	if err != nil {
		if grpcLn != nil {
			_ = grpcLn.Close()
		}
		return nil, err
	}
	if grpcLn != nil {
		serveGRPC(ctx, in.A2AGRPC(), grpcLn, log)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	con, err := newConsole(ctx, *cfg, nc, eg, auth, mux, reg, log, demoPool)
	if err != nil {
		return nil, err
	}
	con.Register(mux)
	signer, err := pushSigner()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if signer != nil {
		mux.Handle("GET "+push.JWKSPath, signer)
	}
	need, err := serveNeeds(*cfg)
	if err != nil {
		return nil, err
	}
	mountOps(mux, *cfg, newOpsMux(reg, nc, js, need, obs.Detail{Name: "pools", Get: func(ctx context.Context) (any, error) { return in.Pools(ctx) }}))
	warnBodyLimit(*cfg, nc, log)
	return &http.Server{
		Handler:           tracing.Handler(ingress.CleanPaths(mux), untraced...),
		ReadHeaderTimeout: 10 * time.Second,
		// Bounds reading a request (headers and body) from a slow client;
		// streamed answers are bounded by egress's write deadlines instead.
		ReadTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second,
		BaseContext: func(net.Listener) context.Context { return shutdownContext(ctx) },
	}, nil
}

// shutdownContext is the context of the requests a server serves until
// ctx ends: it ends with ctx, its cause egress.ErrShuttingDown, so that a
// wait the shutdown cuts is answered 503 naming the request rather than
// taken for a client gone (an empty answer).
func shutdownContext(ctx context.Context) context.Context {
	base, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() { stop(egress.ErrShuttingDown) })
	return base
}

// openNATSLine is the banner's warning, with auth on HTTP (credential: the
// example's credential header) and the embedded server, that the server
// has no users: the front door's isolation of principals does not hold
// for a process on this machine reading the streams (e2a replay, e2a
// tail), which the deployment's NATS users and TLS give (deploy/).
func openNATSLine(cfg Config, credential string) string {
	if credential == "" || cfg.NatsURL != "" {
		return ""
	}
	return "\n             no NATS users: any process on this machine reads every principal's requests (deploy/ runs NATS with users and TLS)"
}

// grpcLine is the banner's line of the A2A v1.0 gRPC binding, if on.
func grpcLine(cfg Config) string {
	if cfg.GRPCAddr == "" {
		return ""
	}
	return "\n  A2A gRPC   " + cfg.GRPCAddr + "   (A2A v1.0 gRPC binding, listed in the card)"
}

// storeLine is the banner's line of the embedded server's store: where
// it is kept, or that it goes when dev stops.
func storeLine(cfg Config) string {
	switch {
	case cfg.NatsURL != "":
		return ""
	case cfg.StoreDir == "":
		return "\n  store      a temporary directory, removed when dev stops (set E2A_STORE_DIR=<dir> to keep requests across restarts)"
	default:
		return "\n  store      " + cfg.StoreDir + "   (E2A_STORE_DIR: kept across restarts)"
	}
}

// archiveLine is the banner's line of the archiver, if on.
func archiveLine(cfg Config) string {
	if !cfg.Archive {
		return ""
	}
	return "\n  archiver   E2A_AUDIT into E2A_ARCHIVE, compressed (E2A_ARCHIVE=true)"
}

// serveGRPC serves the A2A v1.0 gRPC binding on ln until ctx ends, then
// stops it gracefully (streams in flight get 10 s).
func serveGRPC(ctx context.Context, gs *grpc.Server, ln net.Listener, log *slog.Logger) {
	log.Info("A2A v1.0 gRPC binding serving", "addr", ln.Addr().String())
	go func() {
		if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("A2A gRPC binding stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		done := make(chan struct{})
		go func() { gs.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			gs.Stop()
		}
	}()
}

// newConsole builds the web console with auth, the Auth of the other
// endpoints (none when only the none scheme is enabled); its indexer runs
// until ctx ends.
func newConsole(ctx context.Context, cfg Config, nc *nats.Conn, eg *egress.Service, auth *ingress.Auth, mux *http.ServeMux, reg *prometheus.Registry, log *slog.Logger, demoPool string) (*console.Console, error) {
	opts := []console.Option{console.WithStreamsConfig(cfg.StreamsConfig()), console.WithRegisterer(reg), console.WithGatherer(reg), console.WithLogger(log)}
	if !auth.Open() {
		opts = append(opts, console.WithAuth(func(r *http.Request) (tenant.Principal, int, error) {
			p, err := auth.Tenant(r)
			if err != nil {
				return tenant.Principal{}, ingress.AuthStatus(err), err
			}
			return p, 0, nil
		}), console.WithChallenge(auth.SetChallenge))
	}
	if demoPool != "" {
		opts = append(opts, console.WithDemo(mux, demoPool))
	}
	pushView, err := pushConsoleOptions(ctx, nc, cfg)
	if err != nil {
		return nil, err
	}
	return console.New(ctx, nc, eg, append(opts, pushView...)...)
}

// serveUntil serves srv on ln until ctx ends, the server fails or one of
// the agents sending on agentDone (agents of them) returns. Then it shuts
// the server down and waits for every agent to end: they drain their
// requests for drain (E2A_AGENT_DRAIN_TIMEOUT) and hand the rest back, so
// it waits that long and a little more (an agent still running then is an
// error, a non-zero exit). Before, it waited 10 s and for the first agent
// only: a request still running was neither finished nor handed back.
// With stopping set (an operations server: opsListeners.serve), it calls
// stopping instead and shuts the server down once the agents ended (or
// it stops waiting for them), so that it serves through their drain.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger, agentDone <-chan error, agents int, drain time.Duration, stopping func()) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case err := <-agentDone:
		agents--
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	log.Info("shutting down")
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	if stopping == nil {
		shutdown()
	} else {
		stopping()
		defer shutdown()
	}
	limit := time.NewTimer(drain + 5*time.Second)
	defer limit.Stop()
	for ; agents > 0; agents-- {
		select {
		case <-agentDone:
		case <-limit.C:
			return fmt.Errorf("%d agent pool(s) still running %v after the shutdown began", agents, drain+5*time.Second)
		}
	}
	return nil
}

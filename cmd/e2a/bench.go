package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/bench"
)

// benchFlags are the flags of e2a bench beyond bench.Config's fields: the
// modes and their own settings.
type benchFlags struct {
	sweep, rates, peer, peerBin, bridgeKind, replicas, chart *string
	kill                                                     *string
	rounds, workers                                          *int
	coalesce, asJSON, recovery                               *bool
	duration, interval, retention, ackWait                   *time.Duration
	rate                                                     *float64
	headers                                                  headerFlag
}

// newBenchFlags defines e2a bench's flags on fs: c's fields (defaults d)
// and the modes' (the returned benchFlags).
func newBenchFlags(fs *flag.FlagSet, c *bench.Config, d bench.Config) *benchFlags {
	m := &benchFlags{}
	fs.StringVar(&c.Target, "target", "", "base URL of running endpoints (default: the pipeline in this process)")
	fs.StringVar(&c.NATSURL, "nats", "", "with --target: NATS URL whose raw publish rate is the baseline; with --duration: a JetStream server of the soak's own (it provisions the E2A streams there with the bench's settings: never a production server), used instead of one in this process")
	fs.StringVar(&c.Protocol, "protocol", d.Protocol, "one of "+strings.Join(bench.Protocols, ", "))
	fs.IntVar(&c.Requests, "requests", d.Requests, "requests at full load")
	fs.IntVar(&c.Concurrency, "concurrency", d.Concurrency, "clients at full load (closed loop)")
	fs.IntVar(&c.Frames, "frames", d.Frames, "frames per request, the final one included")
	fs.IntVar(&c.FrameBytes, "frame-bytes", d.FrameBytes, "bytes of text per chunk frame")
	fs.DurationVar(&c.Delay, "delay", 0, "agent delay between frames")
	fs.IntVar(&c.Warmup, "warmup", d.Warmup, "warm-up requests")
	m.sweep = fs.String("sweep", joinFloats(d.Sweep), "open-loop loads as fractions of the full-load rate (0.5 always runs)")
	m.rates = fs.String("rates", "", "open-loop loads at fixed rates, requests/s, comma-separated (builds compare at the same offered load); with --replicas, run on each N's processes")
	fs.Float64Var(&c.SweepSeconds, "sweep-seconds", d.SweepSeconds, "seconds per open-loop load")
	fs.IntVar(&c.ReplayOpens, "replay-opens", d.ReplayOpens, "stream opens of finished requests (0: none)")
	fs.IntVar(&c.BaselineMsgs, "baseline-msgs", d.BaselineMsgs, "raw async publishes of the baseline (0: none)")
	fs.IntVar(&c.BaselineBytes, "baseline-bytes", d.BaselineBytes, "bytes per baseline message")
	fs.IntVar(&c.AgentConcurrency, "agent-concurrency", 0, "in-process agent pool concurrency (default max(256, 2×concurrency))")
	fs.BoolVar(&c.SplitConns, "split-conns", false, "in process: give the agent pool its own NATS connection")
	fs.BoolVar(&c.TCP, "tcp", true, "in process and --duration: connect the stages to the embedded server over loopback TCP, as to a NATS cluster in a deployment (--tcp=false: in-memory pipes, as e2a dev)")
	fs.BoolVar(&c.NoAudit, "no-audit", false, "in process and --peer, experiment: delete E2A_AUDIT to measure what auditing costs")
	fs.BoolVar(&c.SyncAlways, "sync-always", false, "in process: fsync every JetStream write")
	fs.StringVar(&c.StoreDir, "store-dir", "", "in process: JetStream store directory (default: temporary)")
	fs.IntVar(&c.WarmMemoryMiB, "warm-mib", 0, "in process and --peer: touch and release this many MiB of memory before measuring (a VM that backs memory lazily; see docs/benchmarks.md)")
	fs.StringVar(&c.RemoteAgent, "remote-agent", d.RemoteAgent, "with --target: the agent the pool runs, demo or bench")
	fs.StringVar(&c.Pool, "pool", "", "E2A requests: agent pool (?agent=)")
	fs.DurationVar(&c.Timeout, "timeout", d.Timeout, "per-request timeout")
	fs.Var(&m.headers, "header", "header added to every request, 'Name: value' (repeatable)")
	m.peer = fs.String("peer", "", "compare with a reference A2A server: "+bench.PeerA2AGo+" (A2A message/stream; the pipeline over E2A SSE too; alternating rounds)")
	m.peerBin = fs.String("peer-bin", "", "with --peer: the reference server's binary (default: built from internal/bench/peer with the go command)")
	m.rounds = fs.Int("rounds", 5, "with --peer: rounds of each system in each phase (A2A, then E2A SSE); with --bridge: rounds of each system")
	m.bridgeKind = fs.String("bridge", "", "measure what a bridge adds: "+bench.BridgeOpenAI+" (an OpenAI-compatible server) or "+bench.BridgeA2A+" (an a2a-go/v2 A2A agent), in process, called directly and through the pipeline and the bridge, and the pipeline's own agent; alternating rounds")
	m.coalesce = fs.Bool("coalesce", true, "with --bridge: the bridge pool coalesces text deltas as e2a agent does (--coalesce=false: each upstream chunk its own frame)")
	m.duration = fs.Duration("duration", 0, "soak: run the in-process pipeline this long at --rate (open loop) and report slopes")
	m.rate = fs.Float64("rate", 0, "soak: requests/s")
	m.interval = fs.Duration("interval", 10*time.Second, "soak: sampling interval")
	m.retention = fs.Duration("retention", 0, "soak: the hot streams' max age and the task index's TTL (E2A_REQUESTS_MAX_AGE, E2A_RESPONSES_MAX_AGE, E2A_TASKS_TTL), which bound the embedded server's memory (default: 24h and 72h, bounded by the streams' bytes)")
	fs.BoolVar(&c.Console, "console", false, "in process and soak: run the console's indexer too, as e2a dev does")
	fs.BoolVar(&c.Archive, "archive", false, "in process: run the archiver too, as e2a dev does")
	m.recovery = fs.Bool("recovery", false, "kill a part of the pipeline mid-stream (--kill) and report, from the clients, how soon each stream goes on and that every stream stayed whole and exactly once (--requests, --frames, --frame-bytes, --delay default to 30, 44, 100 and 100ms here; --frame-bytes applies to the worker kill, the processes run the demo agent)")
	m.kill = fs.String("kill", "", "with --recovery: "+bench.KillWorker+" (default: one agent worker of several in this process, its connection closed), "+
		bench.KillAgent+" (SIGKILL to one of several \"e2a agent --pool demo\" processes), "+bench.KillServe+" (SIGKILL to the \"e2a serve\" process the clients stream from; they reconnect to a second one with Last-Event-ID) or "+
		bench.KillDev+" (SIGKILL to \"e2a dev\", started again on its store; the clients reconnect with Last-Event-ID)")
	m.workers = fs.Int("workers", 0, "with --recovery: workers of the pool, each on its own NATS connection (default 3)")
	m.ackWait = fs.Duration("ack-wait", 0, "with --recovery: the pool's AckWait (default: the agent runtime's, 4s)")
	m.replicas = fs.String("replicas", "", "scaling: N serve + N agent processes of this binary on one JetStream server, for each N of a list (e.g. 1,2,3)")
	m.asJSON = fs.Bool("json", false, "print the report as JSON")
	m.chart = fs.String("chart", "", "write a PNG chart of latency percentiles against offered load")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the full-load phase (with --duration: one per interval, FILE.<seconds>)")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write an allocation profile after the full-load phase")
	fs.StringVar(&c.MutexProfile, "mutexprofile", "", "write a mutex profile of the full-load phase")
	fs.StringVar(&c.BlockProfile, "blockprofile", "", "write a block profile of the full-load phase")
	fs.StringVar(&c.Trace, "trace", "", "write a runtime execution trace of the half-load phase (go tool trace; with --duration: a flight recorder's last seconds when a first frame takes 250 ms or more, once per interval, FILE.<seconds>)")
	return m
}

// runBench runs the load harness (internal/bench): the whole pipeline in
// this process, or running endpoints with --target.
func runBench(ctx context.Context, _ Config, args []string) error {
	d := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	c := d
	m := newBenchFlags(fs, &c, d)
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	// The bench package takes a value out of range for its default (or,
	// --duration, for no soak): refused as any bad flag.
	if err := checkPositive(fs, os.Stderr, "timeout", "interval"); err != nil {
		return err
	}
	if err := checkNotNegative(fs, os.Stderr, "duration", "delay", "retention", "ack-wait"); err != nil {
		return err
	}
	if err := m.apply(&c); err != nil {
		// A list that does not parse, flags no mode takes together.
		return fmt.Errorf("%w: %w", errArgs, err)
	}
	switch {
	case *m.recovery:
		return runBenchRecovery(ctx, c, fs, m)
	case *m.duration > 0:
		return runBenchSoak(ctx, c, m)
	case *m.replicas != "":
		return runBenchReplicas(ctx, c, m)
	case *m.bridgeKind != "":
		return runBridgeBench(ctx, c, *m.bridgeKind, *m.rounds, !*m.coalesce, *m.asJSON)
	case *m.peer != "":
		return runBenchPeer(ctx, c, m)
	}
	return runBenchInProcess(ctx, c, *m.chart, *m.asJSON)
}

// apply completes c from the flags and refuses the combinations no mode
// takes.
func (m *benchFlags) apply(c *bench.Config) error {
	var err error
	if c.Sweep, err = parseFloats("sweep", *m.sweep); err != nil {
		return err
	}
	if c.Rates, err = parseFloats("rates", *m.rates); err != nil {
		return err
	}
	c.Header = http.Header(m.headers)
	if c.Target == "" {
		gcDefault() // the pipeline (and its NATS server, unless --duration --nats) run in this process, as under e2a dev
	}
	if !*m.asJSON {
		c.Progress = func(s string) { fmt.Fprintln(os.Stderr, "bench:", s) }
	}
	if c.WarmMemoryMiB != 0 && (*m.duration > 0 || *m.replicas != "") {
		return errors.New("bench --warm-mib applies to the in-process bench and --peer, not to --duration or --replicas")
	}
	if c.Trace != "" && (*m.replicas != "" || *m.peer != "" || *m.bridgeKind != "") {
		return errors.New("bench --trace traces the half-load phase of the in-process or --target bench (with --duration: the last seconds before a slow first frame), not --replicas, --peer or --bridge")
	}
	if (*m.workers != 0 || *m.ackWait != 0 || *m.kill != "") && !*m.recovery {
		return errors.New("bench --kill, --workers and --ack-wait apply to --recovery")
	}
	if *m.retention != 0 && *m.duration == 0 {
		return errors.New("bench --retention applies to the soak (--duration)")
	}
	if c.NATSURL != "" && c.Target == "" && *m.duration == 0 {
		return errors.New("bench --nats goes with --target (the baseline's server) or --duration (the soak's server)")
	}
	return m.checkModes(c)
}

// modes are the modes chosen other than the in-process (or --target)
// bench, in the order runBench dispatches them.
func (m *benchFlags) modes() []string {
	var on []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"--recovery", *m.recovery}, {"--duration", *m.duration > 0}, {"--replicas", *m.replicas != ""},
		{"--bridge", *m.bridgeKind != ""}, {"--peer", *m.peer != ""}} {
		if f.set {
			on = append(on, f.name)
		}
	}
	return on
}

// checkModes refuses, before anything starts, two modes at once, and
// --target or --chart with a mode, which neither applies to: runBench runs
// the first mode it finds and would drop the others' flags without a word.
func (m *benchFlags) checkModes(c *bench.Config) error {
	on := m.modes()
	switch {
	case len(on) == 0:
		return nil
	case *m.recovery && (c.Target != "" || c.NATSURL != "" || len(on) > 1):
		return errors.New("bench --recovery runs a pipeline of its own (in process, or this binary's processes): no --target, --nats, --peer, --duration, --replicas or --bridge")
	case len(on) > 1:
		return fmt.Errorf("bench %s and %s do not go together: they are different modes", on[0], on[1])
	case c.Target != "":
		return fmt.Errorf("bench --target and %s do not go together: %s runs a pipeline of its own", on[0], on[0])
	case *m.chart != "":
		return fmt.Errorf("bench --chart and %s do not go together: --chart charts the in-process or --target bench", on[0])
	}
	return nil
}

// runBenchSoak runs e2a bench --duration and prints its report.
func runBenchSoak(ctx context.Context, c bench.Config, m *benchFlags) error {
	sr, err := bench.RunSoak(ctx, bench.SoakConfig{Duration: *m.duration, Interval: *m.interval, Rate: *m.rate,
		Protocol: c.Protocol, Console: c.Console, TCP: c.TCP, Frames: c.Frames, FrameBytes: c.FrameBytes, Timeout: c.Timeout, Progress: c.Progress,
		Retention: *m.retention, NATSURL: c.NATSURL, CPUProfile: c.CPUProfile, Trace: c.Trace})
	if err != nil {
		return err
	}
	return printReport(sr, *m.asJSON)
}

// printReport prints a mode's report, as indented JSON with asJSON.
func printReport(r interface{ Text() string }, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(os.Stdout)
		e.SetIndent("", "  ")
		return e.Encode(r)
	}
	_, err := fmt.Fprint(os.Stdout, r.Text())
	return err
}

// runBenchRecovery runs e2a bench --recovery and prints its report. The
// load flags given on the command line override the scenario's defaults.
func runBenchRecovery(ctx context.Context, c bench.Config, fs *flag.FlagSet, m *benchFlags) error {
	rc := bench.DefaultRecoveryConfig()
	rc.Kill, rc.TCP, rc.Timeout, rc.Progress, rc.Header = *m.kill, c.TCP, max(c.Timeout, rc.Timeout), c.Progress, c.Header
	if *m.workers != 0 {
		rc.Workers = *m.workers
	}
	if *m.ackWait != 0 {
		rc.AckWait = *m.ackWait
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "requests":
			rc.Requests = c.Requests
		case "frames":
			rc.Frames = c.Frames
		case "frame-bytes":
			rc.FrameBytes = c.FrameBytes
		case "delay":
			rc.Delay = c.Delay
		}
	})
	rep, err := bench.RunRecovery(ctx, rc)
	if err != nil {
		return err
	}
	return printReport(rep, *m.asJSON)
}

// runBenchReplicas runs e2a bench --replicas and prints its report.
func runBenchReplicas(ctx context.Context, c bench.Config, m *benchFlags) error {
	ns, err := parseInts(*m.replicas)
	if err != nil {
		return fmt.Errorf("bench --replicas: %w", err)
	}
	rr, err := bench.RunReplicas(ctx, bench.ReplicasConfig{Bench: c, Replicas: ns})
	if rr != nil && len(rr.Rows) > 0 {
		if *m.asJSON {
			_ = rr.WriteJSON(os.Stdout)
		} else {
			_ = rr.WriteText(os.Stdout)
		}
	}
	return err
}

// runBenchPeer runs e2a bench --peer and prints its report.
func runBenchPeer(ctx context.Context, c bench.Config, m *benchFlags) error {
	if *m.peer != bench.PeerA2AGo {
		return fmt.Errorf("bench --peer %q: the reference servers are: %s", *m.peer, bench.PeerA2AGo)
	}
	prep, err := bench.RunPeer(ctx, bench.PeerConfig{Bench: c, Rounds: *m.rounds, PeerBin: *m.peerBin})
	if prep != nil {
		if *m.asJSON {
			_ = prep.WriteJSON(os.Stdout)
		} else {
			_ = prep.WriteText(os.Stdout)
		}
	}
	return err
}

// runBenchInProcess runs the in-process (or --target) bench, writes its
// chart when asked, and prints its report.
func runBenchInProcess(ctx context.Context, c bench.Config, chart string, asJSON bool) error {
	rep, err := bench.Run(ctx, c)
	if err != nil {
		return err
	}
	if chart != "" {
		if err := bench.WriteFile(chart, rep.WriteChart); err != nil {
			return err
		}
	}
	if asJSON {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteText(os.Stdout)
}

// runBridgeBench runs `e2a bench --bridge KIND` and prints its report
// (checkModes has refused --target and the other modes).
func runBridgeBench(ctx context.Context, c bench.Config, kind string, rounds int, noCoalesce, asJSON bool) error {
	rep, err := bench.RunBridge(ctx, bench.BridgeConfig{Bench: c, Upstream: kind, Rounds: rounds, NoCoalesce: noCoalesce})
	if rep != nil {
		if asJSON {
			_ = rep.WriteJSON(os.Stdout)
		} else {
			_ = rep.WriteText(os.Stdout)
		}
	}
	return err
}

func joinFloats(fs []float64) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", p)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFloats(flag, s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return nil, fmt.Errorf("bench: --%s %q: %w", flag, s, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// headerFlag collects repeated --header 'Name: value' flags.
type headerFlag http.Header

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("header %q: want 'Name: value'", v)
	}
	if *h == nil {
		*h = headerFlag{}
	}
	http.Header(*h).Add(strings.TrimSpace(k), strings.TrimSpace(val))
	return nil
}

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Config configures a run. Zero values take the defaults of DefaultConfig.
type Config struct {
	// Target is the base URL of running endpoints; empty runs the pipeline
	// in this process.
	Target string `json:"target,omitempty"`
	// NATSURL, with Target, is the server whose raw publish rate is the
	// baseline (none without it).
	NATSURL string `json:"nats_url,omitempty"`
	// Protocol is one of Protocols.
	Protocol string `json:"protocol"`
	// Requests at full load; Concurrency clients send them (closed loop).
	Requests    int `json:"requests"`
	Concurrency int `json:"concurrency"`
	// Frames per request (final frame included), FrameBytes of text in each
	// chunk frame, Delay between the agent's frames.
	Frames     int           `json:"frames"`
	FrameBytes int           `json:"frame_bytes"`
	Delay      time.Duration `json:"agent_delay"`
	// Warmup requests before measuring.
	Warmup int `json:"warmup"`
	// Sweep are the open-loop loads, as fractions of the full-load rate;
	// each runs SweepSeconds (at least 200 requests). 0.5 is always run:
	// it is the half load of the targets.
	Sweep        []float64 `json:"sweep"`
	SweepSeconds float64   `json:"sweep_seconds"`
	// Rates are open-loop loads at fixed rates, requests/s, run after the
	// sweep for SweepSeconds each: the half load moves with the full-load
	// rate, so builds compare at the same offered load only here.
	Rates []float64 `json:"rates,omitempty"`
	// ReplayOpens is the number of stream opens of finished requests
	// (0: no replay phase).
	ReplayOpens int `json:"replay_opens"`
	// BaselineMsgs messages of BaselineBytes are published for the
	// baseline (0: no baseline).
	BaselineMsgs  int `json:"baseline_msgs"`
	BaselineBytes int `json:"baseline_bytes"`
	// AgentConcurrency of the in-process bench agent pool (default
	// max(256, 2×Concurrency)).
	AgentConcurrency int `json:"agent_concurrency"`
	// SplitConns gives the in-process agent pool its own connection.
	SplitConns bool `json:"split_conns"`
	// TCP connects the in-process stages over loopback TCP rather than
	// nats.InProcessServer.
	TCP bool `json:"tcp"`
	// NoAudit runs without E2A_AUDIT (an experiment, not the pipeline as
	// deployed).
	NoAudit bool `json:"no_audit,omitempty"`
	// Console runs the console's indexer beside the stages (in process), as
	// `e2a dev` does.
	Console bool `json:"console,omitempty"`
	// Archive runs the archiver beside the stages (in process), as `e2a
	// dev` does.
	Archive bool `json:"archive,omitempty"`
	// SyncAlways fsyncs every write of the embedded server.
	SyncAlways bool `json:"sync_always"`
	// StoreDir of the embedded server (default: a temporary directory).
	StoreDir string `json:"-"`
	// WarmMemoryMiB, when > 0, is memory touched and released right before
	// the measured phases (WarmMemory), so that a VM whose host backs memory
	// lazily does not charge the run for faulting in cold pages.
	WarmMemoryMiB int `json:"warm_memory_mib,omitempty"`
	// RemoteAgent is the agent a Target runs: "demo" (params.frames counts
	// its text chunks; it writes 4 frames more) or "bench".
	RemoteAgent string `json:"remote_agent,omitempty"`
	// Pool to send E2A requests to (?agent=); default the target's default.
	Pool string `json:"pool,omitempty"`
	// Header is added to every request (e.g. Authorization for a Target).
	Header http.Header `json:"-"`
	// Timeout bounds one request.
	Timeout time.Duration `json:"timeout"`
	// CPUProfile, MemProfile, MutexProfile and BlockProfile, when set, are
	// files written with the profiles of the full-load phase.
	CPUProfile   string `json:"-"`
	MemProfile   string `json:"-"`
	MutexProfile string `json:"-"`
	BlockProfile string `json:"-"`
	// Trace, when set, is a file written with a runtime execution trace of
	// the half-load phase (go tool trace): where its slowest requests
	// waited, and on what (docs/benchmarks.md).
	Trace string `json:"-"`
	// Progress, when set, receives one line per phase as it starts.
	Progress func(string) `json:"-"`
}

// DefaultConfig returns the defaults: e2a-sse, 20,000 requests by 64
// clients, 8 frames of 100 bytes, no delay.
func DefaultConfig() Config {
	return Config{
		Protocol: ProtoE2ASSE, Requests: 20000, Concurrency: 64,
		Frames: 8, FrameBytes: 100, Warmup: 1000,
		Sweep: []float64{0.1, 0.25, 0.5, 0.75, 0.9}, SweepSeconds: 3,
		ReplayOpens: 10000, BaselineMsgs: 200000, BaselineBytes: 400,
		RemoteAgent: "demo", Timeout: time.Minute,
	}
}

func (c *Config) fill() error {
	d := DefaultConfig()
	if c.Protocol == "" {
		c.Protocol = d.Protocol
	}
	if !slices.Contains(Protocols, c.Protocol) {
		return fmt.Errorf("bench: unknown protocol %q (one of %s)", c.Protocol, strings.Join(Protocols, ", "))
	}
	if c.Requests <= 0 || c.Concurrency <= 0 || c.Frames <= 0 || c.FrameBytes <= 0 {
		return errors.New("bench: requests, concurrency, frames and frame size must be > 0")
	}
	if c.Delay < 0 || c.Warmup < 0 || c.ReplayOpens < 0 || c.BaselineMsgs < 0 || c.WarmMemoryMiB < 0 {
		return errors.New("bench: negative delay, warmup, replay opens, baseline or warm memory")
	}
	// 0 is their default below; a negative one was taken for it.
	if c.SweepSeconds < 0 || c.BaselineBytes < 0 || c.AgentConcurrency < 0 {
		return errors.New("bench: negative sweep seconds, baseline bytes or agent concurrency")
	}
	for _, f := range c.Sweep {
		if f <= 0 || f > 2 {
			return fmt.Errorf("bench: sweep load %v not in (0, 2]", f)
		}
	}
	for _, r := range c.Rates {
		if r <= 0 || r > maxRate {
			return fmt.Errorf("bench: rate %v requests/s not in (0, %g]", r, maxRate)
		}
	}
	if !slices.Contains(c.Sweep, 0.5) {
		c.Sweep = append(c.Sweep, 0.5)
	}
	slices.Sort(c.Sweep)
	if c.SweepSeconds <= 0 {
		c.SweepSeconds = d.SweepSeconds
	}
	if c.BaselineBytes <= 0 {
		c.BaselineBytes = d.BaselineBytes
	}
	if c.AgentConcurrency <= 0 {
		c.AgentConcurrency = max(256, 2*c.Concurrency)
	}
	if c.RemoteAgent == "" {
		c.RemoteAgent = d.RemoteAgent
	}
	if c.RemoteAgent != "demo" && c.RemoteAgent != "bench" {
		return fmt.Errorf("bench: remote agent %q (demo or bench)", c.RemoteAgent)
	}
	if c.Timeout <= 0 {
		c.Timeout = d.Timeout
	}
	c.Target = strings.TrimRight(c.Target, "/")
	return nil
}

// Machine describes where the run happened.
type Machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Go         string `json:"go"`
}

func machine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// Target is one performance target of the first design brief (docs/performance.md, "Against DESIGN.md's targets") and whether the run met it.
type Target struct {
	What  string  `json:"what"`
	Want  string  `json:"want"`
	Got   float64 `json:"got"`
	Unit  string  `json:"unit"`
	Met   bool    `json:"met"`
	Notes string  `json:"notes,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Started  time.Time `json:"started"`
	Machine  Machine   `json:"machine"`
	Config   Config    `json:"config"`
	InProc   bool      `json:"in_process"`
	Baseline *Baseline `json:"baseline,omitempty"`
	Full     Phase     `json:"full_load"`
	Sweep    []Phase   `json:"sweep"`
	Half     *Phase    `json:"half_load,omitempty"`
	Replay   *Phase    `json:"replay,omitempty"`
	// ReplayEngine is the in-process replay engine alone (egress.Replay,
	// no HTTP).
	ReplayEngine *Phase `json:"replay_engine,omitempty"`
	// MemoryWarmup is what Config.WarmMemoryMiB measured, when set.
	MemoryWarmup *MemoryWarmup `json:"memory_warmup,omitempty"`
	// Ratio is full-load delivered frames/s divided by the baseline rate.
	Ratio   float64  `json:"frames_to_raw_publish_ratio,omitempty"`
	Targets []Target `json:"targets"`
}

// run is one Run's state, shared by its phases.
type run struct {
	cfg      Config
	rep      *Report
	progress func(string)
	pipe     *Pipeline // in process
	cl       *client
	ids      *idGen
}

// Run runs the benchmark.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, progress: cfg.Progress,
		rep: &Report{Started: time.Now().UTC(), Machine: machine(), Config: cfg, InProc: cfg.Target == ""}}
	if r.progress == nil {
		r.progress = func(string) {}
	}
	base, nc, closeConn, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	if err := r.warmMemory(); err != nil {
		return nil, err
	}
	// 1. Baseline, on a quiet server, before any load.
	if err := r.baseline(ctx, nc); err != nil {
		return nil, err
	}
	r.cl = r.newClient(base)
	r.ids = &idGen{prefix: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	// Warm-up: connections, consumer, caches.
	if err := r.warmup(ctx); err != nil {
		return nil, err
	}
	// 2. Full load.
	if err := r.fullLoad(ctx); err != nil {
		return nil, err
	}
	// 3. Open-loop sweep.
	if err := r.sweep(ctx); err != nil {
		return nil, err
	}
	// 4. Replay of finished requests.
	r.replay(ctx)
	r.rep.Targets = targets(r.rep)
	r.rep.Full.IDs = nil
	return r.rep, nil
}

// connect starts the in-process pipeline, or connects to Config.NATSURL
// for the baseline of a target; nc is nil for a target without it. The
// caller calls closeConn when done.
func (r *run) connect(ctx context.Context) (base string, nc *nats.Conn, closeConn func(), err error) {
	cfg := r.cfg
	if r.rep.InProc {
		r.progress("starting the in-process pipeline")
		pipe, err := StartPipeline(ctx, PipelineOptions{
			StoreDir: cfg.StoreDir, SyncAlways: cfg.SyncAlways, AgentConcurrency: cfg.AgentConcurrency,
			Frames: cfg.Frames, FrameBytes: cfg.FrameBytes, Delay: cfg.Delay, SplitConns: cfg.SplitConns, TCP: cfg.TCP, NoAudit: cfg.NoAudit, Console: cfg.Console, Archive: cfg.Archive,
		})
		if err != nil {
			return "", nil, nil, err
		}
		r.pipe = pipe
		return pipe.URL, pipe.NC, pipe.Close, nil
	}
	if cfg.NATSURL != "" {
		nc, err := streams.Connect(ctx, streams.ConnConfig{NatsURL: cfg.NATSURL, Name: "e2a-bench"})
		if err != nil {
			return "", nil, nil, fmt.Errorf("bench: baseline connection: %w", err)
		}
		return cfg.Target, nc, nc.Close, nil
	}
	return cfg.Target, nil, func() {}, nil
}

// warmMemory touches and releases Config.WarmMemoryMiB, when set.
func (r *run) warmMemory() error {
	if r.cfg.WarmMemoryMiB <= 0 {
		return nil
	}
	r.progress(fmt.Sprintf("warming %d MiB of memory", r.cfg.WarmMemoryMiB))
	w, err := WarmMemory(r.cfg.WarmMemoryMiB)
	if err != nil {
		return err
	}
	r.rep.MemoryWarmup = w
	r.progress(w.String())
	return nil
}

// baseline measures the raw async publish rate on nc, when there is one.
func (r *run) baseline(ctx context.Context, nc *nats.Conn) error {
	cfg := r.cfg
	if nc == nil || cfg.BaselineMsgs <= 0 {
		return nil
	}
	r.progress(fmt.Sprintf("baseline: %d raw async publishes of %d B", cfg.BaselineMsgs, cfg.BaselineBytes))
	b, err := measureBaseline(ctx, nc, cfg.BaselineMsgs, cfg.BaselineBytes, 4096)
	if err != nil {
		return err
	}
	r.rep.Baseline = &b
	return nil
}

// newClient is the load generator's client of the endpoints at base, with
// the parameters of the agent it calls: the bench agent in process (or a
// target's bench agent), else the demo agent, which writes 4 frames more
// than its chunks.
func (r *run) newClient(base string) *client {
	cfg := r.cfg
	cl := &client{base: base, proto: cfg.Protocol, pool: cfg.Pool, header: cfg.Header,
		hc: newHTTPClient(max(cfg.Concurrency, 64) * 4), sessions: make(chan string, 8*max(cfg.Concurrency, 64))}
	if r.rep.InProc || cfg.RemoteAgent == "bench" {
		cl.params = map[string]any{"text": "bench", "frames": cfg.Frames, "frame_bytes": cfg.FrameBytes, "delay_ms": cfg.Delay.Milliseconds()}
		cl.expectFrames = cfg.Frames
	} else {
		cl.params = map[string]any{"text": payload(cfg.FrameBytes), "frames": max(cfg.Frames-4, 0), "delay_ms": cfg.Delay.Milliseconds()}
		if cfg.Frames >= 4 {
			cl.expectFrames = cfg.Frames
		}
	}
	return cl
}

// do makes one request within Config.Timeout.
func (r *run) do(ctx context.Context, id string, start time.Time) result {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	return r.cl.do(ctx, id, start)
}

// warmup sends Config.Warmup requests, not measured; it fails when every
// one of them did.
func (r *run) warmup(ctx context.Context) error {
	cfg := r.cfg
	if cfg.Warmup <= 0 {
		return nil
	}
	r.progress(fmt.Sprintf("warm-up: %d requests", cfg.Warmup))
	w := closedLoop(ctx, "warmup", cfg.Warmup, cfg.Concurrency, r.ids, r.do, false, false)
	if w.OK == 0 {
		return fmt.Errorf("bench: every warm-up request failed: %v", w.Errors)
	}
	return nil
}

// fullLoad runs the closed loop at full load with the profiles asked for,
// and in process splits its allocations and CPU by component.
func (r *run) fullLoad(ctx context.Context) error {
	cfg, rep := r.cfg, r.rep
	r.progress(fmt.Sprintf("full load: %d requests, %d clients, %s", cfg.Requests, cfg.Concurrency, cfg.Protocol))
	var prof0 allocProfile
	if rep.InProc {
		prof0 = readAllocProfile()
	}
	stop, err := startProfiles(cfg, rep.InProc)
	if err != nil {
		return err
	}
	rep.Full = closedLoop(ctx, "full", cfg.Requests, cfg.Concurrency, r.ids, r.do, true, true)
	cpuProf, err := stop()
	if err != nil {
		return err
	}
	if rep.InProc {
		rep.Full.Allocs = splitAllocs(prof0, readAllocProfile(), rep.Full.AllocsPerRequest)
		if len(cpuProf) > 0 {
			rep.Full.CPU = splitCPU(cpuProf, rep.Full.CPUPerRequest)
		}
	}
	if rep.Baseline != nil && rep.Baseline.MsgsPerSec > 0 {
		rep.Ratio = rep.Full.FramesPerSec / rep.Baseline.MsgsPerSec
	}
	return nil
}

// sweep runs the open-loop loads: Config.Sweep's fractions of the full-load
// rate (tracing the half load when asked), then Config.Rates.
func (r *run) sweep(ctx context.Context) error {
	cfg, rep := r.cfg, r.rep
	if full := rep.Full.RPS; full > 0 {
		for _, f := range cfg.Sweep {
			rate := f * full
			n := max(int(rate*cfg.SweepSeconds), 200)
			r.progress(fmt.Sprintf("open loop: %.0f%% of full load = %.0f requests/s, %d requests", f*100, rate, n))
			p, err := r.openLoop(ctx, fmt.Sprintf("%.0f%%", f*100), n, rate, f == 0.5 && cfg.Trace != "")
			if err != nil {
				return err
			}
			rep.Sweep = append(rep.Sweep, p)
			if f == 0.5 {
				h := p
				rep.Half = &h
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	for _, rate := range cfg.Rates {
		n := max(int(rate*cfg.SweepSeconds), 200)
		r.progress(fmt.Sprintf("open loop: %.0f requests/s, %d requests", rate, n))
		p, err := r.openLoop(ctx, fmt.Sprintf("%.0f/s", rate), n, rate, false)
		if err != nil {
			return err
		}
		rep.Sweep = append(rep.Sweep, p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// openLoop runs one open-loop phase of n requests at rate, traced into
// Config.Trace when trace is set.
func (r *run) openLoop(ctx context.Context, name string, n int, rate float64, trace bool) (Phase, error) {
	var stopTrace func() error
	if trace {
		var err error
		if stopTrace, err = startTrace(r.cfg.Trace); err != nil {
			return Phase{}, err
		}
	}
	p := openLoop(ctx, name, n, rate, max(4*r.cfg.Concurrency, 256), r.ids, r.do)
	if stopTrace != nil {
		if err := stopTrace(); err != nil {
			return Phase{}, fmt.Errorf("bench: trace: %w", err)
		}
	}
	return p, nil
}

// replay opens the streams of finished requests over HTTP and, in
// process, reads them with the replay engine alone.
func (r *run) replay(ctx context.Context) {
	cfg, rep, cl := r.cfg, r.rep, r.cl
	if cfg.ReplayOpens <= 0 {
		return
	}
	finished := rep.Full.IDs
	if cfg.Protocol != ProtoE2ASSE && cfg.Protocol != ProtoE2ANDJSON {
		finished = r.replayFill(ctx)
	}
	if len(finished) == 0 {
		return
	}
	r.progress(fmt.Sprintf("replay: %d stream opens of finished requests, %d clients", cfg.ReplayOpens, cfg.Concurrency))
	var k atomic.Int64
	pick := func() string { return finished[int(k.Add(1)-1)%len(finished)] }
	p := closedLoop(ctx, "replay", cfg.ReplayOpens, cfg.Concurrency, &idGen{}, func(ctx context.Context, _ string, start time.Time) result {
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		return cl.open(ctx, pick(), start)
	}, false, true)
	rep.Replay = &p
	if rep.InProc {
		r.progress("replay engine: egress.Replay without HTTP")
		var k2 atomic.Int64
		p := closedLoop(ctx, "replay-engine", cfg.ReplayOpens, cfg.Concurrency, &idGen{}, func(ctx context.Context, _ string, start time.Time) result {
			return replayEngine(ctx, r.pipe.NC, finished[int(k2.Add(1)-1)%len(finished)], start, cl.expectFrames)
		}, false, true)
		rep.ReplayEngine = &p
	}
}

// replayFill makes E2A requests to replay, for a protocol that does not
// tell the E2A request id, and returns their ids.
func (r *run) replayFill(ctx context.Context) []string {
	cfg, cl := r.cfg, r.cl
	fill := &client{base: cl.base, proto: ProtoE2ASSE, pool: cl.pool, header: cl.header, hc: cl.hc,
		params: cl.params, expectFrames: cl.expectFrames}
	n := min(cfg.ReplayOpens, 4000)
	r.progress(fmt.Sprintf("replay: writing %d E2A requests to replay", n))
	p := closedLoop(ctx, "replay-fill", n, cfg.Concurrency, r.ids, func(ctx context.Context, id string, start time.Time) result {
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		return fill.do(ctx, id, start)
	}, true, false)
	return p.IDs
}

// replayEngine reads a finished request with egress.Replay.
func replayEngine(ctx context.Context, nc *nats.Conn, id string, start time.Time, expect int) (res result) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := egress.Replay(ctx, nc, id, 0, func(f render.Frame) error {
		if res.frames == 0 {
			res.ttff = time.Since(start)
		}
		res.frames++
		if f.Response.IsFinal {
			res.e2e = time.Since(start)
		}
		return nil
	})
	if err != nil {
		res.err = err
	} else if expect > 0 && res.frames != expect {
		res.err = fmt.Errorf("%d frames, expected %d", res.frames, expect)
	}
	return res
}

func targets(r *Report) []Target {
	note := ""
	if r.Config.Frames != 8 || !r.InProc {
		note = "the targets are defined in process with 8 frames per request"
	}
	t := []Target{{
		What: "requests/s at full load", Want: "≥ 5000", Got: r.Full.RPS, Unit: "requests/s",
		Met: r.Full.RPS >= 5000 && clean(r.Full), Notes: joinNotes(note, failedNote(r.Full)),
	}}
	if r.Half != nil {
		t = append(t, Target{What: "TTFF p99 at half load", Want: "≤ 10 ms", Got: r.Half.TTFF.P99, Unit: "ms",
			Met:   r.Half.TTFF.P99 <= 10 && clean(*r.Half),
			Notes: joinNotes(fmt.Sprintf("half load = %.0f requests/s", r.Half.OfferedRPS), failedNote(*r.Half))})
	}
	if r.Replay != nil {
		t = append(t, Target{What: "replay stream opens/s (finished requests)", Want: "≥ 2000", Got: r.Replay.RPS, Unit: "opens/s",
			Met: r.Replay.RPS >= 2000 && clean(*r.Replay), Notes: failedNote(*r.Replay)})
	}
	return t
}

// clean reports whether a phase can meet a target: it ran requests and none
// failed (its figures leave the failed requests out: a timed-out request,
// the slowest of all, is not in the percentiles).
func clean(p Phase) bool { return p.OK > 0 && p.Failed == 0 }

// failedNote says why a phase with failed requests cannot meet its target.
func failedNote(p Phase) string {
	if p.Failed == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d requests failed", p.Failed, p.Requests)
}

func joinNotes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// startTrace starts a runtime execution trace into the file at path; stop
// ends it and closes the file.
func startTrace(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}

// startCPUProfile profiles this process's CPU into memory until stop,
// which returns the profile. When the profile cannot start (another one is
// running: go test -cpuprofile), err says why and stop returns nil.
func startCPUProfile() (stop func() []byte, err error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return func() []byte { return nil }, err
	}
	return func() []byte {
		pprof.StopCPUProfile()
		return buf.Bytes()
	}, nil
}

// startProfiles starts the profiles asked for; stop writes them.
func startProfiles(cfg Config, cpuSplit bool) (stop func() (cpuProfile []byte, err error), err error) {
	// The CPU profile goes to memory (the split by component reads it) and
	// to cfg.CPUProfile when asked. A profile another caller runs (go test
	// -cpuprofile) leaves the split out rather than failing the bench.
	stopCPU := func() []byte { return nil }
	if cfg.CPUProfile != "" || cpuSplit {
		var err error
		if stopCPU, err = startCPUProfile(); err != nil && cfg.CPUProfile != "" {
			return nil, err
		}
	}
	if cfg.MutexProfile != "" {
		runtime.SetMutexProfileFraction(5)
	}
	if cfg.BlockProfile != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	return func() ([]byte, error) {
		var errs []error
		prof := stopCPU()
		if prof != nil && cfg.CPUProfile != "" {
			errs = append(errs, os.WriteFile(cfg.CPUProfile, prof, 0o644))
		}
		write := func(name, path string) {
			if path == "" {
				return
			}
			errs = append(errs, WriteFile(path, func(w io.Writer) error { return pprof.Lookup(name).WriteTo(w, 0) }))
		}
		write("allocs", cfg.MemProfile)
		write("mutex", cfg.MutexProfile)
		write("block", cfg.BlockProfile)
		if cfg.MutexProfile != "" {
			runtime.SetMutexProfileFraction(0)
		}
		if cfg.BlockProfile != "" {
			runtime.SetBlockProfileRate(0)
		}
		return prof, errors.Join(errs...)
	}, nil
}

// maxRate bounds an open-loop rate (requests/s, --rates and the soak's
// --rate): an interval's requests are allocated up front, and --rate 1e12
// crashed the process (runtime: out of memory).
const maxRate = 1e6

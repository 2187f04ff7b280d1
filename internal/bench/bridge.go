package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/streams"
)

// The upstreams of RunBridge.
const (
	// BridgeOpenAI is an OpenAI-compatible chat completions server
	// (ChatUpstream) behind bridge/openai.
	BridgeOpenAI = "openai"
	// BridgeA2A is an A2A v1.0 agent written with a2a-go/v2 (A2AUpstream)
	// behind bridge/a2abridge.
	BridgeA2A = "a2a"
)

// BridgeUpstreams are the upstreams RunBridge measures.
var BridgeUpstreams = []string{BridgeOpenAI, BridgeA2A}

// BridgePool is the pool the bridge serves in RunBridge.
const BridgePool = "bridge"

// bridgeModel is the model the bridge asks the upstream for.
const bridgeModel = "bench-model"

// BridgeConfig is a measure of what a bridge adds to its upstream.
type BridgeConfig struct {
	// Bench is the load: Requests per round, Concurrency, Frames (the
	// upstream's content chunks plus one: the frames of a request through
	// the bridge, the final one included), FrameBytes (bytes of text per
	// content chunk), Delay (the upstream's, between chunks), Warmup,
	// Timeout, AgentConcurrency, TCP, NoAudit, WarmMemoryMiB, CPUProfile
	// (the bridged rounds' profiles, merged; the direct and native rounds'
	// beside it, suffixed .direct and .native) and Progress.
	Bench Config
	// Upstream is one of BridgeUpstreams.
	Upstream string
	// Rounds of each system, alternating (≥ 1).
	Rounds int
	// NoCoalesce runs the bridge pool with the agent runtime's coalescing
	// of text deltas off, so each upstream chunk is a frame of its own (as
	// when a model streams its tokens slower than frames are stored); by
	// default the pool runs as `e2a agent --openai` does, and chunks that
	// arrive while a frame is being stored join the next frame.
	NoCoalesce bool
}

// BridgeSide is one system's figures over its rounds.
type BridgeSide struct {
	Name string    `json:"name"`
	RPS  []float64 `json:"requests_per_s_by_round"`
	// MedianRPS and the latencies (ms) are medians of the rounds'.
	MedianRPS float64 `json:"median_requests_per_s"`
	TTFF50    float64 `json:"ttff_p50_ms"`
	TTFF99    float64 `json:"ttff_p99_ms"`
	E2E50     float64 `json:"e2e_p50_ms"`
	// CPUPerRequest (ms) and AllocsPerRequest are medians of the rounds':
	// this whole process (the pipeline, its NATS server, the upstream and
	// the load generator all run in it) over the round's requests.
	CPUPerRequest    float64 `json:"cpu_ms_per_request"`
	AllocsPerRequest float64 `json:"allocs_per_request"`
	BytesPerRequest  float64 `json:"bytes_per_request"`
	// FramesPerRequest is the frames a request delivered, on average: for
	// the upstream called directly its content chunks and [DONE].
	FramesPerRequest float64 `json:"frames_per_request"`
	OK               int     `json:"ok"`
	Failed           int     `json:"failed"`
	SequenceErrors   int     `json:"sequence_errors"`
	// Errors are the first distinct failures with their counts.
	Errors map[string]int `json:"errors,omitempty"`
	// CPU divides the rounds' CPU per request between components (from
	// their CPU profiles; nil without a sample).
	CPU *BridgeSplit `json:"cpu_split,omitempty"`
}

// clean reports whether the side can meet a target: it ran requests and
// none failed (its figures leave failed requests out).
func (s BridgeSide) clean() bool { return s.OK > 0 && s.Failed == 0 && s.SequenceErrors == 0 }

// failedNote says why a side with failed requests cannot meet a target.
func (s BridgeSide) failedNote() string {
	return failedNote(Phase{Failed: s.Failed, Requests: s.OK + s.Failed})
}

// BridgeReport is the outcome of RunBridge.
type BridgeReport struct {
	Machine    Machine       `json:"machine"`
	Upstream   string        `json:"upstream"`
	Rounds     int           `json:"rounds"`
	Requests   int           `json:"requests_per_round"`
	Clients    int           `json:"clients"`
	Frames     int           `json:"frames_per_request"`
	FrameBytes int           `json:"frame_bytes"`
	Delay      time.Duration `json:"upstream_delay"`
	Coalesce   bool          `json:"coalesce"`
	TCP        bool          `json:"tcp"`
	NoAudit    bool          `json:"no_audit,omitempty"`
	// Direct is the load generator calling the upstream itself; Bridged
	// the same requests over E2A SSE through the pipeline to the bridge
	// pool; Native the pipeline answering over E2A SSE from its own bench
	// agent (the same number of frames of the same size, no upstream): the
	// pipeline without a bridge.
	Direct  BridgeSide `json:"direct"`
	Bridged BridgeSide `json:"bridged"`
	Native  BridgeSide `json:"native"`
	// Added* are bridged minus direct, taken in each round (the systems'
	// rounds of one cycle) and the median over the rounds: what putting
	// the upstream behind the pipeline adds to a request.
	AddedTTFF50        float64   `json:"added_ttff_p50_ms"`
	AddedTTFF99        float64   `json:"added_ttff_p99_ms"`
	AddedCPU           float64   `json:"added_cpu_ms_per_request"`
	AddedAllocs        float64   `json:"added_allocs_per_request"`
	AddedTTFF50ByRound []float64 `json:"added_ttff_p50_ms_by_round"`
	AddedCPUByRound    []float64 `json:"added_cpu_ms_per_request_by_round"`
	// OverNative* are bridged minus native the same way: what the bridge
	// and the upstream call add to the pipeline answering by itself.
	OverNativeTTFF50 float64 `json:"over_native_ttff_p50_ms"`
	OverNativeCPU    float64 `json:"over_native_cpu_ms_per_request"`
	// MemoryWarmup is what Bench.WarmMemoryMiB measured, when set.
	MemoryWarmup *MemoryWarmup `json:"memory_warmup,omitempty"`
	Targets      []Target      `json:"targets"`
}

// bridgeSystem is one system of a bridge run: how it sends a request, and
// its rounds.
type bridgeSystem struct {
	name   string
	cl     *client
	phases []Phase
	profs  [][]byte
}

// RunBridge measures what a bridge adds: the upstream (ChatUpstream or
// A2AUpstream, in this process) called directly by the load generator, the
// same upstream through the pipeline (in this process, as `e2a bench` runs
// it) and the bridge pool (bridge.New around openai.New or a2abridge.New,
// as `e2a agent --openai` or `--a2a` runs it), and the pipeline answering
// from its own bench agent, in rounds of the same load, alternating (the
// order turns each cycle), so that the machine's other load weighs on
// every system alike.
func RunBridge(ctx context.Context, bc BridgeConfig) (*BridgeReport, error) {
	cfg := bc.Bench
	cfg.Protocol = ProtoE2ASSE
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if !slices.Contains(BridgeUpstreams, bc.Upstream) {
		return nil, fmt.Errorf("bench: bridge upstream %q (the bridges measured: %s)", bc.Upstream, strings.Join(BridgeUpstreams, ", "))
	}
	if bc.Rounds < 1 {
		return nil, fmt.Errorf("bench: rounds must be > 0, got %d", bc.Rounds)
	}
	if cfg.Frames < 2 {
		return nil, fmt.Errorf("bench: --bridge needs ≥ 2 frames per request (content chunks and the final frame), got %d", cfg.Frames)
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	up, err := startBridgeUpstream(bc.Upstream, cfg)
	if err != nil {
		return nil, err
	}
	defer up.close()
	progress("starting the in-process pipeline and the bridge pool (bridge/" + up.pkg + " → " + up.url + ")")
	pipe, err := StartPipeline(ctx, PipelineOptions{AgentConcurrency: cfg.AgentConcurrency, Frames: cfg.Frames, FrameBytes: cfg.FrameBytes,
		Delay: cfg.Delay, NoAudit: cfg.NoAudit, TCP: cfg.TCP})
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	stopPool, err := startBridgePool(ctx, pipe, up, cfg.AgentConcurrency, !bc.NoCoalesce)
	if err != nil {
		return nil, err
	}
	defer stopPool()

	rep := &BridgeReport{Machine: machine(), Upstream: bc.Upstream, Rounds: bc.Rounds, Requests: cfg.Requests,
		Clients: cfg.Concurrency, Frames: cfg.Frames, FrameBytes: cfg.FrameBytes, Delay: cfg.Delay, Coalesce: !bc.NoCoalesce,
		TCP: cfg.TCP, NoAudit: cfg.NoAudit}
	systems := bridgeSystems(cfg, pipe.URL, up.direct, !bc.NoCoalesce)
	if err := runBridgeRounds(ctx, cfg, bc.Rounds, systems, rep, progress); err != nil {
		return nil, err
	}
	return rep, finishBridge(rep, cfg, systems)
}

// bridgeUpstream is the upstream of a bridge run.
type bridgeUpstream struct {
	kind, url string
	pkg       string  // the bridge's package under bridge/
	direct    *client // the load generator's client calling it directly (without its HTTP client)
	close     func()
}

// startBridgeUpstream starts the upstream kind, answering cfg.Frames − 1
// chunks of cfg.FrameBytes, cfg.Delay apart.
func startBridgeUpstream(kind string, cfg Config) (*bridgeUpstream, error) {
	if kind == BridgeA2A {
		up, err := StartA2AUpstream(cfg.Frames-1, cfg.FrameBytes, cfg.Delay)
		if err != nil {
			return nil, err
		}
		// A direct answer is the Task, the chunks and the final status:
		// Frames + 1 results, not checked by number (no sequence).
		return &bridgeUpstream{kind: kind, url: up.URL, pkg: "a2abridge", close: up.Close,
			direct: &client{base: up.URL, proto: ProtoA2AV1Stream, params: map[string]any{}}}, nil
	}
	up, err := StartChatUpstream(cfg.Frames-1, cfg.FrameBytes, cfg.Delay)
	if err != nil {
		return nil, err
	}
	return &bridgeUpstream{kind: kind, url: up.URL, pkg: "openai", close: up.Close,
		direct: &client{base: strings.TrimSuffix(up.URL, "/v1"), proto: ProtoOpenAIChat, expectFrames: cfg.Frames}}, nil
}

// bridgeSystems are the three systems: direct (calling the upstream as
// direct does), bridged, native.
func bridgeSystems(cfg Config, pipeURL string, direct *client, coalesce bool) [3]*bridgeSystem {
	hc := newHTTPClient(max(cfg.Concurrency, 64) * 4)
	direct.hc = hc
	bridged := &client{base: pipeURL, proto: ProtoE2ASSE, pool: BridgePool, hc: hc,
		params: map[string]any{"text": "bench request"}, expectFrames: cfg.Frames}
	if coalesce {
		bridged.expectFrames = 0 // chunks may join: each request's sequence and final frame are still checked
	}
	return [3]*bridgeSystem{
		{name: "upstream called directly", cl: direct},
		{name: "through the pipeline and the bridge", cl: bridged},
		{name: "pipeline, its own agent (no bridge)", cl: &client{base: pipeURL, proto: ProtoE2ASSE, hc: hc,
			params: map[string]any{"text": "bench", "frames": cfg.Frames, "frame_bytes": cfg.FrameBytes}, expectFrames: cfg.Frames}},
	}
}

// startBridgePool serves BridgePool on pipe's agent connection with the
// bridge to upstream, as `e2a agent --pool bridge --openai URL` (or --a2a
// URL) does (its conversations store, metrics and logs; no credentials:
// the upstream asks none). stop ends it.
func startBridgePool(ctx context.Context, pipe *Pipeline, upstream *bridgeUpstream, concurrency int, coalesce bool) (stop func(), err error) {
	quiet := slog.New(slog.DiscardHandler)
	client, err := bridge.NewClient(upstream.url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(pipe.NC)
	if err != nil {
		return nil, err
	}
	scfg := streams.DefaultConfig()
	scfg.Replicas = 1
	conv, err := bridge.OpenConversations(ctx, js, scfg)
	if err != nil {
		return nil, err
	}
	var up bridge.Upstream
	if upstream.kind == BridgeA2A {
		up, err = a2abridge.New(ctx, client, a2abridge.WithConversations(BridgePool, conv), a2abridge.WithLogger(quiet))
	} else {
		up, err = openai.New(client, bridgeModel, openai.WithHistory(BridgePool, conv), openai.WithLogger(quiet))
	}
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	h, err := bridge.New(BridgePool, up, bridge.WithMaxInFlight(concurrency), bridge.WithMetrics(reg), bridge.WithLogger(quiet))
	if err != nil {
		return nil, err
	}
	opts := []agent.Option{agent.WithConcurrency(concurrency), agent.WithMaxAckPending(max(concurrency, agent.DefaultMaxAckPending)),
		agent.WithMetrics(reg), agent.WithLogger(quiet)}
	if !coalesce {
		opts = append(opts, agent.WithCoalesce(0, 0))
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(rctx, pipe.AgentNC, BridgePool, h, opts...) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}
	if err := waitConsumer(ctx, js, BridgePool); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// runBridgeRounds warms every system up, then runs the rounds: in cycle r
// each system once, the order turned by r.
func runBridgeRounds(ctx context.Context, cfg Config, rounds int, systems [3]*bridgeSystem, rep *BridgeReport, progress func(string)) error {
	ids := &idGen{prefix: "bridge-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	round := func(s *bridgeSystem, name string, n int) Phase {
		return closedLoop(ctx, name, n, cfg.Concurrency, ids, labelled(func(ctx context.Context, id string, start time.Time) result {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			return s.cl.do(ctx, id, start)
		}), false, true)
	}
	if cfg.WarmMemoryMiB > 0 {
		progress(fmt.Sprintf("warming %d MiB of memory", cfg.WarmMemoryMiB))
		w, err := WarmMemory(cfg.WarmMemoryMiB)
		if err != nil {
			return err
		}
		rep.MemoryWarmup = w
		progress(w.String())
	}
	if cfg.Warmup > 0 {
		progress(fmt.Sprintf("warm-up: %d requests each", cfg.Warmup))
		for _, s := range systems {
			if w := round(s, "warmup", cfg.Warmup); w.OK == 0 {
				return fmt.Errorf("bench: every warm-up request %s failed: %v", s.name, w.Errors)
			}
		}
	}
	for r := range rounds {
		for i := range systems {
			s := systems[(i+r)%len(systems)]
			progress(fmt.Sprintf("round %d/%d: %s, %d requests, %d clients", r+1, rounds, s.name, cfg.Requests, cfg.Concurrency))
			stopCPU, _ := startCPUProfile() // not started (another profile runs): no split
			s.phases = append(s.phases, round(s, s.name, cfg.Requests))
			s.profs = append(s.profs, stopCPU())
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// finishBridge fills the report from the rounds, writes the profiles
// asked for and reports failed requests.
func finishBridge(rep *BridgeReport, cfg Config, systems [3]*bridgeSystem) error {
	direct, bridged, native := systems[0], systems[1], systems[2]
	rep.Direct, rep.Bridged, rep.Native = bridgeSide(direct), bridgeSide(bridged), bridgeSide(native)
	diff := func(a, b *bridgeSystem, f func(Phase) float64) []float64 {
		out := make([]float64, len(a.phases))
		for i := range a.phases {
			out[i] = f(a.phases[i]) - f(b.phases[i])
		}
		return out
	}
	ttff50 := func(p Phase) float64 { return p.TTFF.P50 }
	cpu := func(p Phase) float64 { return p.CPUPerRequest }
	rep.AddedTTFF50ByRound, rep.AddedCPUByRound = diff(bridged, direct, ttff50), diff(bridged, direct, cpu)
	rep.AddedTTFF50, rep.AddedCPU = median(rep.AddedTTFF50ByRound), median(rep.AddedCPUByRound)
	rep.AddedTTFF99 = median(diff(bridged, direct, func(p Phase) float64 { return p.TTFF.P99 }))
	rep.AddedAllocs = median(diff(bridged, direct, func(p Phase) float64 { return p.AllocsPerRequest }))
	rep.OverNativeTTFF50, rep.OverNativeCPU = median(diff(bridged, native, ttff50)), median(diff(bridged, native, cpu))
	rep.Targets = []Target{
		{What: "bridge: added TTFF p50 (bridged − direct)", Want: "≤ 2 ms", Got: rep.AddedTTFF50, Unit: "ms",
			Met: rep.AddedTTFF50 <= 2 && rep.Bridged.clean() && rep.Direct.clean(), Notes: joinNotes("in process, median over rounds", rep.Bridged.failedNote())},
		{What: "bridge: added CPU per request (bridged − direct)", Want: "≤ 0.3 ms", Got: rep.AddedCPU, Unit: "ms",
			Met: rep.AddedCPU <= 0.3 && rep.Bridged.clean() && rep.Direct.clean(), Notes: joinNotes("whole process, median over rounds", rep.Bridged.failedNote())},
	}
	var errs []error
	if cfg.CPUProfile != "" {
		for _, s := range []struct {
			sys    *bridgeSystem
			suffix string
		}{{bridged, ""}, {direct, ".direct"}, {native, ".native"}} {
			if err := writeMerged(cfg.CPUProfile+s.suffix, s.sys.profs); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if cfg.MemProfile != "" {
		// The allocations of the whole run, all three systems (the
		// profile is cumulative): read a system's by its packages.
		errs = append(errs, WriteFile(cfg.MemProfile, func(w io.Writer) error { return pprof.Lookup("allocs").WriteTo(w, 0) }))
	}
	for _, s := range []BridgeSide{rep.Direct, rep.Bridged, rep.Native} {
		if s.Failed > 0 || s.SequenceErrors > 0 {
			errs = append(errs, fmt.Errorf("bench: %s: %d failed requests, %d with frames out of sequence: %v", s.Name, s.Failed, s.SequenceErrors, s.Errors))
		}
	}
	return errors.Join(errs...)
}

// bridgeSide sums up a system's rounds.
func bridgeSide(s *bridgeSystem) BridgeSide {
	out := BridgeSide{Name: s.name}
	var frames int64
	var cpuMS float64
	var n int
	for _, p := range s.phases {
		out.RPS = append(out.RPS, p.RPS)
		out.OK += p.OK
		out.Failed += p.Failed
		out.SequenceErrors += p.SequenceErrors
		frames += p.Frames
		cpuMS += p.CPUPerRequest * float64(p.Requests)
		n += p.Requests
		for k, v := range p.Errors {
			if out.Errors == nil {
				out.Errors = map[string]int{}
			}
			out.Errors[k] += v
		}
	}
	out.MedianRPS = median(out.RPS)
	out.TTFF50 = median(field(s.phases, func(p Phase) float64 { return p.TTFF.P50 }))
	out.TTFF99 = median(field(s.phases, func(p Phase) float64 { return p.TTFF.P99 }))
	out.E2E50 = median(field(s.phases, func(p Phase) float64 { return p.E2E.P50 }))
	out.CPUPerRequest = median(field(s.phases, func(p Phase) float64 { return p.CPUPerRequest }))
	out.AllocsPerRequest = median(field(s.phases, func(p Phase) float64 { return p.AllocsPerRequest }))
	out.BytesPerRequest = median(field(s.phases, func(p Phase) float64 { return p.BytesPerRequest }))
	if out.OK > 0 {
		out.FramesPerRequest = float64(frames) / float64(out.OK+out.Failed)
	}
	if n > 0 {
		out.CPU = splitBridgeCPU(mergeProfiles(s.profs), cpuMS/float64(n))
	}
	return out
}

// writeMerged writes the merged CPU profiles of a system's rounds.
func writeMerged(path string, profs [][]byte) error {
	p := mergeProfiles(profs)
	if p == nil {
		return fmt.Errorf("bench: no CPU profile for %s (another profile running?)", path)
	}
	return WriteFile(path, p.Write)
}

// WriteText prints the report.
func (r *BridgeReport) WriteText(w io.Writer) error {
	var b strings.Builder
	coalesce := "text deltas coalesced as e2a agent does"
	if !r.Coalesce {
		coalesce = "each upstream chunk its own frame (coalescing off)"
	}
	fmt.Fprintf(&b, "e2a bench --bridge %s: %d frames per request (%d content chunks of %d B, then the final frame), upstream delay %v, %d clients, %d rounds of %d requests per system, alternating; bridge pool: %s\n",
		r.Upstream, r.Frames, r.Frames-1, r.FrameBytes, r.Delay, r.Clients, r.Rounds, r.Requests, coalesce)
	m := r.Machine
	fmt.Fprintf(&b, "machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s; everything in this process (stages over loopback TCP: %v)\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.OS, m.Arch, m.Go, r.TCP)
	if r.NoAudit {
		b.WriteString("the pipeline WITHOUT E2A_AUDIT (experiment: no audit copy, its promises given up)\n")
	}
	if r.MemoryWarmup != nil {
		b.WriteString(r.MemoryWarmup.String() + "\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  %-40s %9s %9s %9s %9s %11s %11s %11s %11s %7s\n", "system", "req/s", "TTFF p50", "TTFF p99", "E2E p50", "CPU ms/req", "allocs/req", "KiB/req", "frames/req", "failed")
	for _, s := range []BridgeSide{r.Direct, r.Bridged, r.Native} {
		fmt.Fprintf(&b, "  %-40s %9.0f %9.2f %9.2f %9.2f %11.3f %11.0f %11.1f %11.2f %7d\n", s.Name, s.MedianRPS, s.TTFF50, s.TTFF99, s.E2E50,
			s.CPUPerRequest, s.AllocsPerRequest, s.BytesPerRequest/1024, s.FramesPerRequest, s.Failed+s.SequenceErrors)
	}
	fmt.Fprintf(&b, "\n  added by the pipeline and the bridge (bridged − direct, median of the rounds): TTFF p50 %+.2f ms, p99 %+.2f ms; CPU %+.3f ms per request; %+.0f allocations per request\n",
		r.AddedTTFF50, r.AddedTTFF99, r.AddedCPU, r.AddedAllocs)
	fmt.Fprintf(&b, "  added by the bridge and its upstream call to the pipeline alone (bridged − native): TTFF p50 %+.2f ms; CPU %+.3f ms per request\n",
		r.OverNativeTTFF50, r.OverNativeCPU)
	if s := r.Bridged.CPU; s != nil {
		fmt.Fprintf(&b, "  bridged CPU by component: the bridge (bridge, its upstream's package, its HTTP client) %.3f ms, the pipeline (stages, NATS client and server) %.3f ms per request\n",
			s.PerRequest[CompBridge], s.pipelineShare())
	}
	fmt.Fprintf(&b, "  by round: added TTFF p50 %s ms; added CPU %s ms\n", joinFloat(r.AddedTTFF50ByRound, 2), joinFloat(r.AddedCPUByRound, 3))
	b.WriteString("\nCPU ms per request by component (CPU profiles of each system's rounds):\n")
	for _, s := range []BridgeSide{r.Direct, r.Bridged, r.Native} {
		if s.CPU != nil {
			fmt.Fprintf(&b, "  %-40s %s\n", s.Name, s.CPU.line())
		}
	}
	b.WriteString("\ntargets (issue 38, in process):\n")
	for _, t := range r.Targets {
		mark := "MET  "
		if !t.Met {
			mark = "SHORT"
		}
		fmt.Fprintf(&b, "  %s %-50s want %-8s got %.3f %s  (%s)\n", mark, t.What, t.Want, t.Got, t.Unit, t.Notes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinFloat(v []float64, prec int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strings.Join(s, " ")
}

// WriteJSON prints the report as JSON.
func (r *BridgeReport) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

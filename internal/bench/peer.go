package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PeerA2AGo names the reference server of RunPeer: the official a2a-go
// SDK's JSON-RPC server, in memory, built from internal/bench/peer (a
// module of its own pinning a2a-go v0.3.3).
const PeerA2AGo = "a2a-go"

// PeerConfig is a comparison with a reference A2A server.
type PeerConfig struct {
	// Bench is the load (Requests per round, Concurrency, Frames,
	// FrameBytes, Timeout, Warmup); its Protocol is a2a-stream.
	Bench Config
	// Rounds is the number of rounds of each system in each phase
	// (A2A, then E2A SSE), alternating with the reference's.
	Rounds int
	// PeerBin is the peer's executable; empty builds it with the go
	// command from ModuleDir.
	PeerBin string
	// ModuleDir is the pipeline's module root (where go.mod is), for
	// building the peer; empty uses the working directory.
	ModuleDir string
}

// PeerSide is one system's figures: medians over its rounds.
type PeerSide struct {
	Name string    `json:"name"`
	RPS  []float64 `json:"requests_per_s_by_round"`
	// MedianRPS, TTFF50 and TTFF99 (ms) are the medians of the rounds'.
	MedianRPS float64 `json:"median_requests_per_s"`
	TTFF50    float64 `json:"ttff_p50_ms"`
	TTFF99    float64 `json:"ttff_p99_ms"`
	// CPUPerRequest (ms) and AllocsPerRequest are the system's own: the
	// peer process's (from /proc and its /allocs); the pipeline's are this
	// process's in the pipeline's own rounds minus what its profiles of
	// those rounds attribute to the load generator by stack (its client
	// goroutines; the runtime's shared work, the collector and the
	// scheduler, stays counted as the pipeline's).
	CPUPerRequest    float64 `json:"cpu_ms_per_request"`
	AllocsPerRequest float64 `json:"allocs_per_request"`
	// GeneratorCPU (ms) and GeneratorAllocs are the load generator's cost
	// per request of this system: for the reference, this whole process
	// during its rounds (it runs only the generator then; the idle
	// pipeline's timers and the runtime's work included); for the
	// pipeline, the generator's share of the profiles.
	GeneratorCPU    float64 `json:"generator_cpu_ms_per_request"`
	GeneratorAllocs float64 `json:"generator_allocs_per_request"`
	Failed          int     `json:"failed"`
}

// PeerReport is the comparison.
type PeerReport struct {
	Machine  Machine `json:"machine"`
	Peer     string  `json:"peer"`
	Rounds   int     `json:"rounds"`
	Requests int     `json:"requests_per_round"`
	Clients  int     `json:"clients"`
	Events   int     `json:"frames_per_request"`
	// NoAudit: the pipeline ran without E2A_AUDIT (Bench.NoAudit, an
	// experiment that gives up the audit promises).
	NoAudit  bool     `json:"no_audit,omitempty"`
	Pipeline PeerSide `json:"pipeline"`
	Other    PeerSide `json:"reference"`
	// E2ASSE is the pipeline answering the same requests (same agent, same
	// frames) over E2A SSE, in rounds of its own, its CPU and allocations
	// as the pipeline's. Its rounds come after every A2A round (the second
	// phase), alternating with reference rounds of their own: OtherE2ASSE
	// (requests/s and TTFF only; Other holds the reference's CPU and
	// allocations, its generator figures taken over both phases).
	E2ASSE      PeerSide `json:"pipeline_e2a_sse"`
	OtherE2ASSE PeerSide `json:"reference_e2a_sse_phase"`
	// RatioRPS is pipeline ÷ reference requests/s; RatioTTFF50/99 are
	// reference ÷ pipeline (above 1: the pipeline's first frame is sooner).
	RatioRPS    float64 `json:"ratio_requests_per_s"`
	RatioTTFF50 float64 `json:"ratio_ttff_p50"`
	RatioTTFF99 float64 `json:"ratio_ttff_p99"`
	// RatioE2ASSE is the pipeline over E2A SSE ÷ reference requests/s, both
	// of the second phase.
	RatioE2ASSE float64 `json:"ratio_e2a_sse_requests_per_s"`
	// MemoryWarmup is what Bench.WarmMemoryMiB measured, when set.
	MemoryWarmup *MemoryWarmup `json:"memory_warmup,omitempty"`
}

// RunPeer drives the in-process pipeline and the reference A2A server
// (a separate process) with the same load generator over loopback HTTP,
// A2A message/stream, in alternating rounds (pipeline, reference,
// pipeline, …) so that the machine's other load weighs on both alike; then
// the pipeline over E2A SSE, alternating with the reference the same way.
func RunPeer(ctx context.Context, pc PeerConfig) (*PeerReport, error) {
	cfg := pc.Bench
	cfg.Protocol = ProtoA2AStream
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if pc.Rounds < 1 {
		return nil, fmt.Errorf("bench: rounds must be > 0, got %d", pc.Rounds)
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	bin := pc.PeerBin
	if bin == "" {
		dir, err := os.MkdirTemp("", "e2a-bench-peer")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "peer")
		progress("building the reference server (a2a-go v0.3.3, internal/bench/peer)")
		if err := buildPeer(ctx, pc.ModuleDir, bin); err != nil {
			return nil, err
		}
	}
	peer, err := startPeer(ctx, bin, cfg.Frames, cfg.FrameBytes)
	if err != nil {
		return nil, err
	}
	defer peer.stop()

	progress("starting the in-process pipeline")
	pipe, err := StartPipeline(ctx, PipelineOptions{AgentConcurrency: cfg.AgentConcurrency, Frames: cfg.Frames, FrameBytes: cfg.FrameBytes, NoAudit: cfg.NoAudit, TCP: cfg.TCP})
	if err != nil {
		return nil, err
	}
	defer pipe.Close()

	pr := newPeerRun(cfg, peer, pipe.URL)
	var warm *MemoryWarmup
	if cfg.WarmMemoryMiB > 0 {
		progress(fmt.Sprintf("warming %d MiB of memory", cfg.WarmMemoryMiB))
		if warm, err = WarmMemory(cfg.WarmMemoryMiB); err != nil {
			return nil, err
		}
		progress(warm.String())
	}
	if err := pr.warmup(ctx, progress); err != nil {
		return nil, err
	}
	rep := &PeerReport{Machine: machine(), Peer: PeerA2AGo + " v0.3.3", Rounds: pc.Rounds, Requests: cfg.Requests,
		Clients: cfg.Concurrency, Events: cfg.Frames, NoAudit: cfg.NoAudit, MemoryWarmup: warm}
	// Two phases of Rounds cycles each: the pipeline over A2A alternating
	// with the reference, then the pipeline over E2A SSE alternating with
	// the reference. Each ratio is taken against the reference rounds of
	// its own phase, where both systems have served the same number of
	// requests: the pipeline's cost per request grows with what its streams
	// hold (docs/benchmarks.md), so E2A SSE rounds interleaved with the A2A
	// comparison would weigh on the pipeline's side only.
	for _, slots := range [2][2]int{{0, 1}, {2, 3}} { // the A2A phase, then the E2A SSE phase
		for r := range pc.Rounds {
			progress(fmt.Sprintf("round %d/%d: %s, %d requests, %d clients", r+1, pc.Rounds, peerSlots[slots[0]], cfg.Requests, cfg.Concurrency))
			pr.pipelineRound(ctx, slots[0])
			progress(fmt.Sprintf("round %d/%d: %s, %d requests, %d clients", r+1, pc.Rounds, peerSlots[slots[1]], cfg.Requests, cfg.Concurrency))
			if err := pr.referenceRound(ctx, slots[1]); err != nil {
				return nil, err
			}
		}
	}
	return pr.report(rep)
}

// buildPeer builds the reference server from internal/bench/peer, under
// the module root moduleDir, into bin.
func buildPeer(ctx context.Context, moduleDir, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(moduleDir, "internal", "bench", "peer")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: build the peer in %s (or pass its binary): %v\n%s", cmd.Dir, err, out)
	}
	return nil
}

// peerSlots name RunPeer's four kinds of round: the pipeline over A2A, the
// reference (A2A phase), the pipeline over E2A SSE, the reference (E2A SSE
// phase).
var peerSlots = [4]string{"pipeline", "reference", "pipeline e2a-sse", "reference"}

// peerRun is RunPeer's state across its rounds.
type peerRun struct {
	cfg  Config
	peer *peerProc
	// sides are the clients of the pipeline over A2A, of the reference
	// and of the pipeline over E2A SSE (slots 0, 1 and 2).
	sides [3]*client
	ids   *idGen
	// phases are the rounds of each slot of peerSlots.
	phases [4][]Phase
	// peerCPU and peerAllocs are the reference's own CPU and allocations
	// per request in each of its rounds.
	peerCPU, peerAllocs []float64
	// own[i] are the pipeline's CPU and allocations per request in each of
	// slot i's rounds, gen[i] the generator's (i = 0, 2).
	own, gen [3]struct{ cpu, allocs []float64 }
}

// newPeerRun makes the clients of the pipeline at pipeURL and of peer, on
// one HTTP client.
func newPeerRun(cfg Config, peer *peerProc, pipeURL string) *peerRun {
	hc := newHTTPClient(max(cfg.Concurrency, 64) * 4)
	params := map[string]any{"text": "bench", "frames": cfg.Frames, "frame_bytes": cfg.FrameBytes, "delay_ms": 0}
	mk := func(base, proto string) *client {
		return &client{base: base, proto: proto, hc: hc, params: params, sessions: make(chan string, 1)}
	}
	return &peerRun{cfg: cfg, peer: peer,
		sides: [3]*client{mk(pipeURL, ProtoA2AStream), mk(peer.url, ProtoA2AStream), mk(pipeURL, ProtoE2ASSE)},
		ids:   &idGen{prefix: "peer-" + strconv.FormatInt(time.Now().UnixNano(), 36)}}
}

// round runs n requests of cl in a closed loop.
func (pr *peerRun) round(ctx context.Context, cl *client, name string, n int) Phase {
	return closedLoop(ctx, name, n, pr.cfg.Concurrency, pr.ids, func(ctx context.Context, id string, start time.Time) result {
		ctx, cancel := context.WithTimeout(ctx, pr.cfg.Timeout)
		defer cancel()
		return cl.do(ctx, id, start)
	}, false, true)
}

// warmup sends Warmup requests to each side; it fails when every one to a
// side did.
func (pr *peerRun) warmup(ctx context.Context, progress func(string)) error {
	if pr.cfg.Warmup <= 0 {
		return nil
	}
	progress(fmt.Sprintf("warm-up: %d requests each", pr.cfg.Warmup))
	for _, cl := range pr.sides {
		if w := pr.round(ctx, cl, "warmup", pr.cfg.Warmup); w.OK == 0 {
			return fmt.Errorf("bench: every warm-up request to %s failed: %v", cl.base, w.Errors)
		}
	}
	return nil
}

// referenceRound runs a round of the reference into phases[slot], its CPU
// and allocations from its process.
func (pr *peerRun) referenceRound(ctx context.Context, slot int) error {
	cpu0, a0, err := pr.peer.counters(ctx)
	if err != nil {
		return err
	}
	p := pr.round(ctx, pr.sides[1], peerSlots[slot], pr.cfg.Requests)
	pr.phases[slot] = append(pr.phases[slot], p)
	if p.OK == 0 {
		return nil
	}
	cpu1, a1, err := pr.peer.counters(ctx)
	if err != nil {
		return err
	}
	pr.peerCPU = append(pr.peerCPU, perRequest(cpu1-cpu0, p.OK))
	pr.peerAllocs = append(pr.peerAllocs, float64(a1-a0)/float64(p.OK))
	return nil
}

// pipelineRound runs a round of the pipeline into phases[slot], the
// generator's share taken out of this process's figures by profile.
func (pr *peerRun) pipelineRound(ctx context.Context, slot int) {
	prof0 := readAllocProfile()
	stopCPU, _ := startCPUProfile() // not started: no split, see below
	p := pr.round(ctx, pr.sides[slot], peerSlots[slot], pr.cfg.Requests)
	pr.phases[slot] = append(pr.phases[slot], p)
	if p.OK == 0 {
		if stopCPU != nil {
			stopCPU()
		}
		return
	}
	// A profile without a sample (a tiny round, or another CPU profile
	// running) attributes nothing to the generator: the pipeline's
	// figure is then the whole process's.
	var g, a float64
	if cpuSplit := splitCPU(stopCPU(), p.CPUPerRequest); cpuSplit != nil {
		g = cpuSplit.PerRequest[CompLoadGen]
	}
	if allocSplit := splitAllocs(prof0, readAllocProfile(), p.AllocsPerRequest); allocSplit != nil {
		a = allocSplit.PerRequest[CompLoadGen]
	}
	gen, own := &pr.gen[slot], &pr.own[slot]
	gen.cpu, gen.allocs = append(gen.cpu, g), append(gen.allocs, a)
	own.cpu, own.allocs = append(own.cpu, p.CPUPerRequest-g), append(own.allocs, p.AllocsPerRequest-a)
}

// report fills rep with each side's medians over its rounds and the
// ratios; it fails, rep filled, when a request failed.
func (pr *peerRun) report(rep *PeerReport) (*PeerReport, error) {
	rep.Pipeline = side("pipeline (in process, every frame durable)", pr.phases[0])
	rep.Other = side(rep.Peer+" (separate process, in memory)", pr.phases[1])
	rep.E2ASSE = side("pipeline over E2A SSE", pr.phases[2])
	rep.OtherE2ASSE = side(rep.Peer+", rounds of the E2A SSE phase", pr.phases[3])
	for i, s := range []*PeerSide{&rep.Pipeline, nil, &rep.E2ASSE} {
		if s != nil {
			s.CPUPerRequest, s.AllocsPerRequest = median(pr.own[i].cpu), median(pr.own[i].allocs)
			s.GeneratorCPU, s.GeneratorAllocs = median(pr.gen[i].cpu), median(pr.gen[i].allocs)
		}
	}
	rep.Other.CPUPerRequest, rep.Other.AllocsPerRequest = median(pr.peerCPU), median(pr.peerAllocs)
	// The generator's cost against the reference: this process during the
	// reference's rounds, where it runs nothing else.
	refRounds := slices.Concat(pr.phases[1], pr.phases[3])
	rep.Other.GeneratorCPU = median(field(refRounds, func(p Phase) float64 { return p.CPUPerRequest }))
	rep.Other.GeneratorAllocs = median(field(refRounds, func(p Phase) float64 { return p.AllocsPerRequest }))
	if rep.Other.MedianRPS > 0 {
		rep.RatioRPS = rep.Pipeline.MedianRPS / rep.Other.MedianRPS
	}
	if rep.OtherE2ASSE.MedianRPS > 0 {
		rep.RatioE2ASSE = rep.E2ASSE.MedianRPS / rep.OtherE2ASSE.MedianRPS
	}
	if rep.Pipeline.TTFF50 > 0 && rep.Pipeline.TTFF99 > 0 {
		rep.RatioTTFF50, rep.RatioTTFF99 = rep.Other.TTFF50/rep.Pipeline.TTFF50, rep.Other.TTFF99/rep.Pipeline.TTFF99
	}
	if rep.Pipeline.Failed > 0 || rep.Other.Failed > 0 || rep.E2ASSE.Failed > 0 || rep.OtherE2ASSE.Failed > 0 {
		return rep, fmt.Errorf("bench: failed requests: pipeline %d, reference %d, pipeline over E2A SSE %d",
			rep.Pipeline.Failed, rep.Other.Failed+rep.OtherE2ASSE.Failed, rep.E2ASSE.Failed)
	}
	return rep, nil
}

func side(name string, ps []Phase) PeerSide {
	s := PeerSide{Name: name}
	for _, p := range ps {
		s.RPS = append(s.RPS, p.RPS)
		s.Failed += p.Failed
	}
	s.MedianRPS = median(s.RPS)
	s.TTFF50 = median(field(ps, func(p Phase) float64 { return p.TTFF.P50 }))
	s.TTFF99 = median(field(ps, func(p Phase) float64 { return p.TTFF.P99 }))
	return s
}

func field(ps []Phase, f func(Phase) float64) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = f(p)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteText prints the comparison.
func (r *PeerReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "e2a bench --peer %s: A2A message/stream, %d frames per request, %d clients, %d rounds of %d requests each, alternating\n",
		PeerA2AGo, r.Events, r.Clients, r.Rounds, r.Requests)
	m := r.Machine
	fmt.Fprintf(&b, "machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.OS, m.Arch, m.Go)
	if r.NoAudit {
		b.WriteString("the pipeline WITHOUT E2A_AUDIT (experiment: no audit copy, its promises given up)\n")
	}
	if r.MemoryWarmup != nil {
		b.WriteString(r.MemoryWarmup.String() + "\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  %-48s %10s %10s %10s %12s %12s %16s\n", "system", "req/s", "TTFF p50", "TTFF p99", "CPU ms/req", "allocs/req", "generator ms/req")
	for _, s := range []PeerSide{r.Pipeline, r.Other, r.E2ASSE} {
		if s.Name == "" {
			continue
		}
		fmt.Fprintf(&b, "  %-48s %10.0f %10.2f %10.2f %12.3f %12.0f %16.3f\n", s.Name, s.MedianRPS, s.TTFF50, s.TTFF99, s.CPUPerRequest, s.AllocsPerRequest, s.GeneratorCPU)
	}
	fmt.Fprintf(&b, "\n  pipeline ÷ reference requests/s: %.2f×   time to first frame, reference ÷ pipeline: p50 %.2f×, p99 %.2f×\n",
		r.RatioRPS, r.RatioTTFF50, r.RatioTTFF99)
	if r.E2ASSE.Name != "" {
		fmt.Fprintf(&b, "  pipeline over E2A SSE ÷ reference requests/s: %.2f× (the reference at %.0f requests/s in the rounds of that phase)\n",
			r.RatioE2ASSE, r.OtherE2ASSE.MedianRPS)
	}
	fmt.Fprintf(&b, "  (latencies in ms, medians of the rounds; requests/s by round: pipeline %s, reference %s; then pipeline over E2A SSE %s, reference %s)\n",
		joinRates(r.Pipeline.RPS), joinRates(r.Other.RPS), joinRates(r.E2ASSE.RPS), joinRates(r.OtherE2ASSE.RPS))
	_, err := io.WriteString(w, b.String())
	return err
}

func joinRates(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " ")
}

// WriteJSON prints the comparison as JSON.
func (r *PeerReport) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// peerProc is the running reference server.
type peerProc struct {
	cmd *exec.Cmd
	url string
}

func startPeer(ctx context.Context, bin string, frames, frameBytes int) (*peerProc, error) {
	cmd := exec.CommandContext(ctx, bin, "-frames", strconv.Itoa(frames), "-frame-bytes", strconv.Itoa(frameBytes))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the peer %s: %w", bin, err)
	}
	p := &peerProc{cmd: cmd}
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		p.stop()
		return nil, fmt.Errorf("bench: the peer did not say where it listens: %q %v", line, err)
	}
	p.url = url
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return p, nil
}

func (p *peerProc) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// cpu is the peer process's user + system CPU time.
func (p *peerProc) cpu() (time.Duration, error) { return procCPU(p.cmd.Process.Pid) }

// counters reads the peer's CPU time and allocation count.
func (p *peerProc) counters(ctx context.Context) (time.Duration, uint64, error) {
	cpu, err := p.cpu()
	if err != nil {
		return 0, 0, err
	}
	a, err := p.allocs(ctx)
	return cpu, a, err
}

// procCPU is a process's user + system CPU time (/proc/PID/stat).
func procCPU(pid int) (time.Duration, error) {
	if runtime.GOOS != "linux" {
		return 0, errors.New("bench: a process's CPU time is read from /proc (Linux)")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parens.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat %q", b)
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, nil
}

// procPeakRSS is the largest resident set size process pid has had
// (VmHWM in /proc/<pid>/status), in bytes.
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench: /proc/%d/status VmHWM %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("bench: /proc/%d/status has no VmHWM", pid)
}

// allocs is the peer's runtime.MemStats.Mallocs.
func (p *peerProc) allocs(ctx context.Context) (uint64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/allocs", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var m struct {
		Mallocs uint64 `json:"mallocs"`
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	return m.Mallocs, err
}

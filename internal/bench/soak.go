package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SoakConfig configures `e2a bench --duration D --rate R`: the in-process
// pipeline under an open-loop load at a fixed rate, sampled every Interval.
type SoakConfig struct {
	Duration, Interval time.Duration
	Rate               float64
	// Protocol is one of Protocols (default e2a-sse).
	Protocol           string
	Frames, FrameBytes int
	// Console runs the console's indexer too, as `e2a dev` does.
	Console bool
	// TCP connects the stages over loopback TCP (PipelineOptions.TCP).
	TCP bool
	// NATSURL runs the soak against that JetStream server instead of one
	// embedded in this process (PipelineOptions.NATSURL); the samples'
	// store size is then 0 (the server's disk is not read), and heap, RSS
	// and CPU are the stages' alone.
	NATSURL string `json:"nats_url,omitempty"`
	// Retention is the hot streams' max age (PipelineOptions.Retention;
	// zero: the defaults, 24 h bounded by bytes, which a soak at
	// thousands of requests/s fills: E2A_REQUESTS then refuses new
	// requests, by design).
	Retention time.Duration `json:"retention,omitempty"`
	Timeout   time.Duration
	// CPUProfile, when set, writes a CPU profile of each interval to
	// CPUProfile.<seconds since the start> (what a store that fills costs,
	// interval by interval).
	CPUProfile string `json:"-"`
	// Trace, when set, keeps a runtime flight recorder and writes its
	// last seconds to Trace.<seconds since the start> when a request's
	// first frame takes TraceSlow (default DefaultTraceSlow) or longer,
	// once per interval (what the slow requests waited on: go tool trace).
	Trace     string        `json:"-"`
	TraceSlow time.Duration `json:"-"`
	Progress  func(string)  `json:"-"`
}

// SoakSample is one interval.
type SoakSample struct {
	At        float64 `json:"at_s"`
	RPS       float64 `json:"requests_per_s"`
	Failed    int     `json:"failed"`
	HeapBytes uint64  `json:"heap_bytes"`
	// LiveHeapBytes is the heap a collection forced once the interval's
	// requests are done (none in flight) found live (/gc/heap/live:bytes),
	// what the memory formula of docs/capacity.md models; HeapBytes, read
	// before it, adds the garbage allocated since the last cycle.
	LiveHeapBytes uint64 `json:"live_heap_bytes"`
	// Requests is how many requests the soak has sent so far.
	Requests int `json:"requests"`
	// Subjects is how many distinct subjects the embedded server holds in
	// every stream and bucket: its per-subject index, the memory that grows
	// with the requests kept (docs/capacity.md, Memory).
	Subjects   uint64 `json:"subjects"`
	RSSBytes   uint64 `json:"rss_bytes"`
	StoreBytes int64  `json:"store_bytes"`
	// TTFF of the interval's requests, and the process CPU per request:
	// the per-request cost shows a decline before the rate does.
	TTFF          Percentiles `json:"ttff"`
	CPUPerRequest float64     `json:"cpu_ms_per_request"`
	// Errors are the interval's first distinct failures with their counts.
	Errors map[string]int `json:"errors,omitempty"`
}

// SoakReport holds the samples and their least-squares slopes per minute.
type SoakReport struct {
	Machine          Machine      `json:"machine"`
	Config           SoakConfig   `json:"config"`
	Samples          []SoakSample `json:"samples"`
	RPSSlope         float64      `json:"rps_per_min"`
	CPUSlope         float64      `json:"cpu_ms_per_request_per_min"`
	HeapSlope        float64      `json:"heap_bytes_per_min"`
	RSSSlope         float64      `json:"rss_bytes_per_min"`
	StoreBytesPerMin float64      `json:"store_bytes_per_min"`
	// LivePerRequest is the least-squares slope of the live heap over the
	// requests sent: the bytes each request leaves in memory.
	LivePerRequest float64 `json:"live_heap_bytes_per_request"`
}

func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseUint(f[1], 10, 64)
	return n * uint64(os.Getpagesize())
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				n += i.Size()
			}
		}
		return nil
	})
	return n
}

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// RunSoak runs the soak.
func RunSoak(ctx context.Context, sc SoakConfig) (*SoakReport, error) {
	progress := sc.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if sc.Interval <= 0 {
		sc.Interval = 10 * time.Second
	}
	if sc.Timeout <= 0 {
		sc.Timeout = time.Minute
	}
	if sc.Rate <= 0 || sc.Duration <= 0 {
		return nil, fmt.Errorf("bench: soak needs --duration and --rate")
	}
	if sc.Rate > maxRate {
		return nil, fmt.Errorf("bench: soak --rate %v requests/s not in (0, %g]", sc.Rate, maxRate)
	}
	var dir string // the embedded server's store; none for a server of its own
	if sc.NATSURL == "" {
		d, err := os.MkdirTemp("", "e2a-soak")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if sc.Protocol == "" {
		sc.Protocol = ProtoE2ASSE
	}
	if !slices.Contains(Protocols, sc.Protocol) {
		return nil, fmt.Errorf("bench: unknown protocol %q (one of %s)", sc.Protocol, strings.Join(Protocols, ", "))
	}
	if sc.Retention < 0 {
		return nil, fmt.Errorf("bench: soak --retention %v: want a positive duration, or 0 for the defaults", sc.Retention)
	}
	pipe, err := StartPipeline(ctx, PipelineOptions{StoreDir: dir, Frames: sc.Frames, FrameBytes: sc.FrameBytes, Console: sc.Console, TCP: sc.TCP,
		Retention: sc.Retention, NATSURL: sc.NATSURL})
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	cl := &client{base: pipe.URL, proto: sc.Protocol, hc: newHTTPClient(256), sessions: make(chan string, 512)}
	cl.params = map[string]any{"text": "bench", "frames": sc.Frames, "frame_bytes": sc.FrameBytes}
	cl.expectFrames = sc.Frames
	tracer, err := startSoakTracer(sc.Trace, sc.TraceSlow, time.Now())
	if err != nil {
		return nil, err
	}
	defer tracer.stop()
	do := func(ctx context.Context, id string, start time.Time) result {
		ctx, cancel := context.WithTimeout(ctx, sc.Timeout)
		defer cancel()
		r := cl.do(ctx, id, start)
		tracer.observe(r)
		return r
	}
	ids := &idGen{prefix: "soak-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	rep := &SoakReport{Machine: machine(), Config: sc}
	start := time.Now()
	var xs, rps, heap, rs, store, cpu, sent, live []float64
	requests := 0
	for time.Since(start) < sc.Duration && ctx.Err() == nil {
		n := max(int(sc.Rate*sc.Interval.Seconds()), 1)
		stopCPU := func() []byte { return nil }
		if sc.CPUProfile != "" {
			if stopCPU, err = startCPUProfile(); err != nil {
				return nil, err
			}
		}
		if err := tracer.next(); err != nil {
			return nil, err
		}
		ph := openLoop(ctx, "soak", n, sc.Rate, 4096, ids, do)
		if prof := stopCPU(); prof != nil {
			if err := os.WriteFile(fmt.Sprintf("%s.%04.0f", sc.CPUProfile, time.Since(start).Seconds()), prof, 0o644); err != nil {
				return nil, err
			}
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		at := time.Since(start).Seconds()
		// The live heap of a collection at a point where no request is in
		// flight: what the requests kept hold, not when the last cycle ran.
		runtime.GC()
		requests += ph.Requests
		s := SoakSample{At: at, RPS: ph.RPS, Failed: ph.Failed, HeapBytes: m.HeapAlloc, RSSBytes: rss(), StoreBytes: dirSize(dir), Requests: requests,
			TTFF: ph.TTFF, CPUPerRequest: ph.CPUPerRequest, Errors: ph.Errors, LiveHeapBytes: liveHeap(), Subjects: pipe.subjects(ctx)}
		rep.Samples = append(rep.Samples, s)
		progress(fmt.Sprintf("soak %.0fs: %.0f req/s, %d failed, TTFF p99 %.1f ms, %.3f ms CPU/req, heap %d MiB (live %d), RSS %d MiB, store %d MiB, %d subjects%s",
			s.At, s.RPS, s.Failed, s.TTFF.P99, s.CPUPerRequest, s.HeapBytes>>20, s.LiveHeapBytes>>20, s.RSSBytes>>20, s.StoreBytes>>20, s.Subjects, firstError(s.Errors)))
		xs = append(xs, s.At/60)
		rps, heap, rs, store = append(rps, s.RPS), append(heap, float64(s.HeapBytes)), append(rs, float64(s.RSSBytes)), append(store, float64(s.StoreBytes))
		cpu = append(cpu, s.CPUPerRequest)
		sent, live = append(sent, float64(requests)), append(live, float64(s.LiveHeapBytes))
	}
	rep.RPSSlope, rep.HeapSlope, rep.RSSSlope, rep.StoreBytesPerMin = slope(xs, rps), slope(xs, heap), slope(xs, rs), slope(xs, store)
	rep.CPUSlope, rep.LivePerRequest = slope(xs, cpu), slope(sent, live)
	return rep, nil
}

// DefaultTraceSlow is SoakConfig.TraceSlow's default.
const DefaultTraceSlow = 250 * time.Millisecond

// soakTracer keeps a runtime flight recorder of the last seconds and
// writes it, at most once per interval, when a request's first frame took
// longer than slow: what the slow requests waited on.
type soakTracer struct {
	path  string
	slow  time.Duration
	start time.Time
	fr    *trace.FlightRecorder
	mu    sync.Mutex
	done  bool // this interval's snapshot is written
	err   error
}

func startSoakTracer(path string, slow time.Duration, start time.Time) (*soakTracer, error) {
	if path == "" {
		return nil, nil
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 3 * time.Second})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	return &soakTracer{path: path, slow: cmp.Or(slow, DefaultTraceSlow), start: start, fr: fr}, nil
}

// observe writes the snapshot if r is this interval's first slow request.
func (t *soakTracer) observe(r result) {
	if t == nil || r.ttff < t.slow {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	f, err := os.Create(fmt.Sprintf("%s.%04.0f", t.path, time.Since(t.start).Seconds()))
	if err == nil {
		_, err = t.fr.WriteTo(f)
		err = errors.Join(err, f.Close())
	}
	t.err = cmp.Or(t.err, err)
}

// next starts an interval; it returns the error of a write that failed.
func (t *soakTracer) next() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = false
	return t.err
}

func (t *soakTracer) stop() {
	if t != nil {
		t.fr.Stop()
	}
}

// Text renders the soak report.
func (r *SoakReport) Text() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "machine: %s, %d CPUs, GOMAXPROCS %d, %s/%s, %s\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.OS, m.Arch, m.Go)
	console := ""
	if r.Config.Console {
		console = ", console indexer on"
	}
	if r.Config.Retention > 0 {
		console += fmt.Sprintf(", hot streams kept %s", r.Config.Retention)
	}
	if r.Config.NATSURL != "" {
		console += ", NATS server in its own process (heap, RSS and CPU: the stages'; store not read)"
	}
	fmt.Fprintf(&b, "soak: %s, %s at %.0f req/s (open loop)%s, samples every %s\n", r.Config.Protocol, r.Config.Duration, r.Config.Rate, console, r.Config.Interval)
	fmt.Fprintf(&b, "%8s %10s %8s %10s %10s %12s %10s %10s %10s %10s %10s\n", "at", "req/s", "failed", "TTFF p50", "TTFF p99", "CPU ms/req", "heap MiB", "live MiB", "RSS MiB", "store MiB", "subjects")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "%7.0fs %10.0f %8d %10.2f %10.2f %12.3f %10.1f %10.1f %10.1f %10.1f %10d\n", s.At, s.RPS, s.Failed, s.TTFF.P50, s.TTFF.P99, s.CPUPerRequest,
			float64(s.HeapBytes)/(1<<20), float64(s.LiveHeapBytes)/(1<<20), float64(s.RSSBytes)/(1<<20), float64(s.StoreBytes)/(1<<20), s.Subjects)
	}
	fmt.Fprintf(&b, "slopes per minute: req/s %+.1f, CPU %+.4f ms/request, heap %+.2f MiB, RSS %+.2f MiB, store %+.2f MiB\n",
		r.RPSSlope, r.CPUSlope, r.HeapSlope/(1<<20), r.RSSSlope/(1<<20), r.StoreBytesPerMin/(1<<20))
	fmt.Fprintf(&b, "live heap after a forced collection: %+.0f B per request sent (slope)\n", r.LivePerRequest)
	// Failures by message, with the interval each was first seen in.
	total, first := map[string]int{}, map[string]float64{}
	for _, s := range r.Samples {
		for msg, n := range s.Errors {
			if _, ok := first[msg]; !ok {
				first[msg] = s.At
			}
			total[msg] += n
		}
	}
	msgs := slices.Sorted(maps.Keys(total))
	slices.SortStableFunc(msgs, func(a, b string) int { return cmp.Compare(first[a], first[b]) })
	for _, msg := range msgs {
		fmt.Fprintf(&b, "failed from %.0fs: %d × %s\n", first[msg], total[msg], msg)
	}
	return b.String()
}

// liveHeap is the heap the last collection marked live.
func liveHeap() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m[0].Value.Uint64()
}

// firstError renders the most frequent of a sample's failures for the
// progress line ("" when none).
func firstError(errs map[string]int) string {
	top, n := "", 0
	for msg, c := range errs {
		if c > n || c == n && msg < top {
			top, n = msg, c
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d × %s)", n, top)
}

package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p99_9_ms"`
	Max  float64 `json:"max_ms"`
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	at := func(q float64) float64 { return ms(d[rank(q, len(d))]) }
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999), Max: ms(d[len(d)-1])}
}

// rank is the index of the q-quantile (0..1) in n sorted values, by
// nearest rank: ceil(q·n)−1, within [0, n−1] (n > 0). The load phases'
// percentiles and the recovery's resume delays both use it.
func rank(q float64, n int) int {
	i := int(q*float64(n)+0.999999) - 1
	return min(max(i, 0), n-1)
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Phase is the outcome of one load phase.
type Phase struct {
	Name string `json:"name"`
	// Mode is "closed" (Concurrency clients, each sending its next request
	// when the previous one ended) or "open" (requests started at
	// OfferedRPS whatever the answers, latencies counted from the instant
	// each was due).
	Mode        string  `json:"mode"`
	Concurrency int     `json:"concurrency"`
	OfferedRPS  float64 `json:"offered_rps,omitempty"`
	Requests    int     `json:"requests"`
	OK          int     `json:"ok"`
	Failed      int     `json:"failed"`
	// SequenceErrors counts requests whose frames broke the E2A invariants
	// (gap, duplicate, out of order).
	SequenceErrors int     `json:"sequence_errors"`
	Frames         int64   `json:"frames"`
	Seconds        float64 `json:"seconds"`
	RPS            float64 `json:"requests_per_s"`
	FramesPerSec   float64 `json:"frames_per_s"`
	// TTFF is the time to first frame, E2E the time to the final frame.
	TTFF Percentiles `json:"ttff"`
	E2E  Percentiles `json:"e2e"`
	// AllocsPerRequest and BytesPerRequest are the runtime.MemStats deltas
	// of the whole process (every stage and the client in-process) divided
	// by the requests.
	AllocsPerRequest float64 `json:"allocs_per_request"`
	BytesPerRequest  float64 `json:"bytes_per_request"`
	// GCCycles is how many garbage collections ran during the phase (the
	// whole process's; an open-loop phase starts right after one). At half
	// load the slowest requests are those caught in one (README,
	// Performance).
	GCCycles uint32 `json:"gc_cycles"`
	// Allocs divides AllocsPerRequest between the pipeline's components,
	// the embedded NATS server and the load generator (in process, full
	// load only).
	Allocs *Split `json:"alloc_split,omitempty"`
	// CPU divides CPUPerRequest the same way, from the phase's CPU
	// profile (in process, full load only).
	CPU *Split `json:"cpu_split,omitempty"`
	// CPUPerRequest is the process CPU time (user + system, every stage and
	// the client) per request in ms, and CPUUse the cores busy on average:
	// less sensitive to other load on a shared machine than the rates.
	CPUPerRequest float64 `json:"cpu_ms_per_request"`
	CPUUse        float64 `json:"cpu_cores_used"`
	// Errors holds the first distinct error messages with their counts.
	Errors map[string]int `json:"errors,omitempty"`
	// IDs are the request ids that finished (not in the JSON).
	IDs []string `json:"-"`
}

// collector gathers results of concurrent requests.
type collector struct {
	mu     sync.Mutex
	ttff   []time.Duration
	e2e    []time.Duration
	frames int64
	ok     int
	failed int
	seq    int
	errs   map[string]int
	ids    []string
	keep   bool
}

func newCollector(n int, keepIDs bool) *collector {
	// Room for n, up to maxPrealloc: the rest grows with the requests
	// made. An open-loop phase's n is its rate × seconds, and --rates 1000
	// --sweep-seconds 1e12 (or a soak's --interval of hours at a high
	// rate) crashed the process up front (runtime: out of memory).
	n = min(n, maxPrealloc)
	return &collector{ttff: make([]time.Duration, 0, n), e2e: make([]time.Duration, 0, n), errs: map[string]int{}, keep: keepIDs}
}

// maxPrealloc bounds the results a collector makes room for at once.
const maxPrealloc = 1 << 20

func (c *collector) add(id string, r result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames += int64(r.frames)
	if r.seqErr != nil {
		c.seq++
		c.note(r.seqErr.Error())
	}
	if r.err != nil {
		c.failed++
		c.note(r.err.Error())
		return
	}
	c.ok++
	c.ttff = append(c.ttff, r.ttff)
	c.e2e = append(c.e2e, r.e2e)
	if c.keep {
		c.ids = append(c.ids, id)
	}
}

func (c *collector) note(msg string) {
	if len(msg) > 160 {
		msg = msg[:160]
	}
	if _, ok := c.errs[msg]; ok || len(c.errs) < 8 {
		c.errs[msg]++
	}
}

func (c *collector) phase(name, mode string, conc int, offered float64, elapsed, cpu time.Duration, m0, m1 *runtime.MemStats) Phase {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.ok + c.failed
	p := Phase{
		Name: name, Mode: mode, Concurrency: conc, OfferedRPS: offered,
		Requests: n, OK: c.ok, Failed: c.failed, SequenceErrors: c.seq, Frames: c.frames,
		Seconds: elapsed.Seconds(),
		TTFF:    percentiles(c.ttff), E2E: percentiles(c.e2e),
		IDs: c.ids,
	}
	if len(c.errs) > 0 {
		p.Errors = c.errs
	}
	if s := elapsed.Seconds(); s > 0 {
		p.RPS = float64(c.ok) / s
		p.FramesPerSec = float64(c.frames) / s
	}
	if n > 0 && cpu > 0 {
		p.CPUPerRequest = ms(cpu) / float64(n)
		p.CPUUse = cpu.Seconds() / elapsed.Seconds()
	}
	if n > 0 && m0 != nil && m1 != nil {
		p.AllocsPerRequest = float64(m1.Mallocs-m0.Mallocs) / float64(n)
		p.BytesPerRequest = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)
		p.GCCycles = m1.NumGC - m0.NumGC
	}
	return p
}

// idGen names the requests of a run: <run>-<n>.
type idGen struct {
	prefix string
	n      atomic.Int64
}

func (g *idGen) next() string { return fmt.Sprintf("%s-%d", g.prefix, g.n.Add(1)) }

type doFunc func(ctx context.Context, id string, start time.Time) result

// closedLoop runs n requests with conc clients.
func closedLoop(ctx context.Context, name string, n, conc int, ids *idGen, do doFunc, keepIDs, memStats bool) Phase {
	col := newCollector(n, keepIDs)
	var m0, m1 runtime.MemStats
	if memStats {
		runtime.GC()
		runtime.ReadMemStats(&m0)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				id := ids.next()
				col.add(id, do(ctx, id, time.Now()))
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	if !memStats {
		return col.phase(name, "closed", conc, 0, elapsed, cpu, nil, nil)
	}
	runtime.ReadMemStats(&m1)
	return col.phase(name, "closed", conc, 0, elapsed, cpu, &m0, &m1)
}

// openLoop starts n requests at rate per second, at most maxInflight at
// once; a request that could not start on time is still measured from
// the instant it was due.
func openLoop(ctx context.Context, name string, n int, rate float64, maxInflight int, ids *idGen, do doFunc) Phase {
	col := newCollector(n, false)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	sem := make(chan struct{}, maxInflight)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			sleepUntil(due)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := ids.next()
			col.add(id, do(ctx, id, due))
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	runtime.ReadMemStats(&m1)
	return col.phase(name, "open", maxInflight, rate, elapsed, cpu, &m0, &m1)
}

// sleepUntil sleeps until t (no spinning: the machine is shared with the
// pipeline under test; requests due meanwhile start together).
func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// sortedPhases orders sweep phases by offered load.
func sortedPhases(ps []Phase) []Phase {
	out := slices.Clone(ps)
	sort.SliceStable(out, func(i, j int) bool { return out[i].OfferedRPS < out[j].OfferedRPS })
	return out
}

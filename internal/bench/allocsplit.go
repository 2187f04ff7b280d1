package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
)

// Components of the in-process bench that allocations are attributed to.
// The pipeline is every stage and its NATS client; the embedded NATS
// server and the load generator run in the same process only because the
// bench puts them there.
const (
	CompIngress  = "ingress"     // HTTP handlers, normalizer, publish, task index
	CompEgress   = "egress"      // replay and the protocol renderers
	CompConsole  = "console"     // the console's indexer (with --console)
	CompArchive  = "archive"     // the archiver (with --archive)
	CompAgent    = "agent"       // the agent runtime and the handler's writes
	CompPipeline = "shared pkgs" // other pipeline packages (streams, subjects…)
	CompNATSGo   = "nats.go"     // the NATS client's own goroutines (read loop, dispatch)
	CompHTTP     = "http server" // net/http's server side (connections, headers)
	CompServer   = "nats-server" // the embedded JetStream server
	CompLoadGen  = "load generator"
	CompOther    = "other"
)

// pipelineComponents are the components counted as the pipeline's own.
var pipelineComponents = []string{CompIngress, CompEgress, CompConsole, CompArchive, CompAgent, CompPipeline, CompNATSGo, CompHTTP}

// component attributes an allocation to a component from its stack
// (function names, leaf first): the embedded server wherever it appears;
// else the stage nearest the leaf (egress when ingress calls the renderer,
// agent when the agent publishes through nats.go; shared packages such as
// e2a, jsonrpc or streams count for the stage that called them); else the
// client's own goroutines, net/http's server or client side.
func component(stack []string) string {
	for _, fn := range stack {
		if strings.Contains(fn, "nats-io/nats-server/") {
			return CompServer
		}
	}
	const pipe = "github.com/e2a-pipeline/pipeline/"
	shared := false
	for _, fn := range stack {
		rest, ok := strings.CutPrefix(fn, pipe)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "internal/bench.benchAgent"), strings.HasPrefix(rest, "agent"):
			return CompAgent
		case strings.HasPrefix(rest, "internal/bench"):
			return CompLoadGen
		case strings.HasPrefix(rest, "egress/console"):
			return CompConsole
		case strings.HasPrefix(rest, "archive"):
			return CompArchive
		case strings.HasPrefix(rest, "egress"):
			return CompEgress
		case strings.HasPrefix(rest, "ingress"), strings.HasPrefix(rest, "normalizer"):
			return CompIngress
		default:
			shared = true
		}
	}
	if shared {
		return CompPipeline
	}
	for _, fn := range stack {
		switch {
		case strings.Contains(fn, "nats-io/nats%2ego"), strings.Contains(fn, "nats-io/nats.go"): // %2e: how the symbol table spells the dot
			return CompNATSGo
		case strings.HasPrefix(fn, "net/http.(*persistConn)"), strings.HasPrefix(fn, "net/http.(*Transport)"),
			strings.HasPrefix(fn, "net/http.(*Client)"):
			return CompLoadGen
		case strings.HasPrefix(fn, "net/http."):
			return CompHTTP
		}
	}
	return CompOther
}

// allocProfile is a snapshot of the sampled allocation profile: the
// estimated objects allocated so far per stack (key: the stack's program
// counters as the profile prints them).
type allocProfile map[string]float64

// readAllocProfile returns the cumulative allocation profile after two
// collections (the runtime publishes a cycle's samples one cycle later).
// It reads the text form of the "allocs" profile, whose stacks are whole
// (runtime.MemProfile cuts them at 32 frames, which loses the caller of a
// deep decode).
func readAllocProfile() allocProfile {
	runtime.GC()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 1); err != nil {
		return nil
	}
	rate := float64(runtime.MemProfileRate)
	p := allocProfile{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// <inuse objects>: <inuse bytes> [<alloc objects>: <alloc bytes>] @ 0x… 0x…
		line := sc.Text()
		head, stack, ok := strings.Cut(line, "] @ ")
		_, counts, ok2 := strings.Cut(head, "[")
		if !ok || !ok2 {
			continue
		}
		o, b, _ := strings.Cut(counts, ": ")
		objs, err1 := strconv.ParseFloat(o, 64)
		size, err2 := strconv.ParseFloat(b, 64)
		if err1 != nil || err2 != nil || objs == 0 {
			continue
		}
		// The runtime samples one allocation per rate bytes on average:
		// scale the count as pprof does (runtime/pprof scaleHeapSample).
		if rate > 1 {
			objs /= 1 - math.Exp(-size/objs/rate)
		}
		p[stack] += objs
	}
	return p
}

// Split is how a phase's allocations or CPU time divide between
// components: the shares of a profile of the phase, scaled to the exact
// figure per request (allocations from runtime.MemStats, CPU milliseconds
// from the OS).
type Split struct {
	// PerRequest maps a component to its allocations (or CPU ms) per
	// request.
	PerRequest map[string]float64 `json:"per_request"`
	// Pipeline is the sum of the pipeline's components per request (the
	// stages and their NATS client; not the embedded server, the load
	// generator, nor the runtime's shared work).
	Pipeline float64 `json:"pipeline_per_request"`
	// Samples is the number of profile stacks (allocations) or samples
	// (CPU) the shares rest on.
	Samples int64 `json:"samples"`
}

// newSplit scales the weights by component so that they sum to
// perRequest; nil when there is no weight.
func newSplit(by map[string]float64, perRequest float64, samples int64) *Split {
	total := 0.0
	for _, v := range by {
		total += v
	}
	if total == 0 {
		return nil
	}
	s := &Split{PerRequest: map[string]float64{}, Samples: samples}
	for c, v := range by {
		s.PerRequest[c] = v / total * perRequest
	}
	for _, c := range pipelineComponents {
		s.Pipeline += s.PerRequest[c]
	}
	return s
}

// group is the report group of component c.
func group(c string) string {
	switch c {
	case CompGC, CompRuntime:
		return "shared"
	case CompServer, CompLoadGen, CompOther:
		return "not the pipeline"
	}
	return "pipeline"
}

// write appends the split as one line: the pipeline's sum and its
// components, then the shared and the other components, each printed with
// format and left out below min.
func (s *Split) write(b *strings.Builder, what, format string, min float64) {
	fmt.Fprintf(b, "  %s by component (%d profile samples): pipeline "+format+" =", what, s.Samples, s.Pipeline)
	order := append(slices.Clone(pipelineComponents), CompGC, CompRuntime, CompServer, CompLoadGen, CompOther)
	sep, g := " ", "pipeline"
	for _, c := range order {
		if s.PerRequest[c] < min {
			continue
		}
		if group(c) != g {
			sep, g = "; "+group(c)+": ", group(c)
		}
		fmt.Fprintf(b, "%s%s "+format, sep, c, s.PerRequest[c])
		sep = ", "
	}
	b.WriteString("\n")
}

// splitAllocs attributes the allocations between two profiles to
// components, scaled so that they sum to perRequest.
func splitAllocs(before, after allocProfile, perRequest float64) *Split {
	by := map[string]float64{}
	var samples int64
	for stk, objs := range after {
		d := objs - before[stk]
		if d <= 0 {
			continue
		}
		samples++
		by[component(stackNames(stk))] += d
	}
	return newSplit(by, perRequest, samples)
}

// stackNames are the function names of a profile stack (its program
// counters in hexadecimal, leaf first), inlined calls included.
func stackNames(stack string) []string {
	var pcs []uintptr
	for _, f := range strings.Fields(stack) {
		if pc, err := strconv.ParseUint(f, 0, 64); err == nil {
			pcs = append(pcs, uintptr(pc))
		}
	}
	var out []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		out = append(out, f.Function)
		if !more {
			return out
		}
	}
}

package bench

import (
	"bytes"
	"strings"

	"github.com/google/pprof/profile"
)

// CPU components beside those of component: the runtime's own work, shared
// by everything in the process.
const (
	CompGC      = "GC"      // the collector's marking and sweeping
	CompRuntime = "runtime" // the scheduler and other runtime work
)

// cpuComponent is component for CPU samples, with the runtime's own work
// apart: the collector (its workers, assists, sweeping) and the rest.
func cpuComponent(stack []string) string {
	c := component(stack)
	if c != CompOther {
		return c
	}
	for _, fn := range stack {
		if strings.HasPrefix(fn, "runtime.gcBgMarkWorker") || strings.HasPrefix(fn, "runtime.gcDrain") ||
			strings.HasPrefix(fn, "runtime.bgsweep") || strings.HasPrefix(fn, "runtime.gcAssist") ||
			strings.HasPrefix(fn, "runtime.markroot") || strings.HasPrefix(fn, "runtime.bgscavenge") {
			return CompGC
		}
	}
	return CompRuntime
}

// splitCPU attributes the samples of the CPU profile data to components,
// scaled so that they sum to msPerRequest; nil when data has no sample.
func splitCPU(data []byte, msPerRequest float64) *Split {
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	vi := len(p.SampleType) - 1 // cpu/nanoseconds, after samples/count
	by := map[string]float64{}
	var samples int64
	for _, s := range p.Sample {
		if vi < 0 || vi >= len(s.Value) {
			continue
		}
		by[cpuComponent(sampleStack(s))] += float64(s.Value[vi])
		samples += s.Value[0]
	}
	return newSplit(by, msPerRequest, samples)
}

// sampleStack is the function names of a CPU profile sample's stack,
// innermost (inlined) call first.
func sampleStack(s *profile.Sample) []string {
	var stack []string
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil {
				stack = append(stack, ln.Function.Name)
			}
		}
	}
	return stack
}

package bench

import (
	"bytes"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// CPU components beside those of component: the runtime's own work, shared
// by everything in the process.
const (
	CompGC      = "GC"      // the collector's marking and sweeping
	CompRuntime = "runtime" // the scheduler and other runtime work
)

// CPUSplit is how a phase's CPU time divides between components: the
// shares of the CPU profile of the phase, scaled to the process CPU per
// request measured from the OS.
type CPUSplit struct {
	// PerRequest maps a component to its CPU milliseconds per request.
	PerRequest map[string]float64 `json:"ms_per_request"`
	// Pipeline is the sum of the pipeline's components (the stages and
	// their NATS client, without the GC and runtime shares, the embedded
	// server and the load generator).
	Pipeline float64 `json:"pipeline_ms_per_request"`
	// Samples is the number of profile samples the shares rest on.
	Samples int64 `json:"samples"`
}

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
func splitCPU(data []byte, msPerRequest float64) *CPUSplit {
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	vi := len(p.SampleType) - 1 // cpu/nanoseconds, after samples/count
	by := map[string]float64{}
	total := 0.0
	var samples int64
	for _, s := range p.Sample {
		if vi < 0 || vi >= len(s.Value) {
			continue
		}
		var stack []string
		for _, loc := range s.Location {
			for _, ln := range loc.Line { // innermost (inlined) call first
				if ln.Function != nil {
					stack = append(stack, ln.Function.Name)
				}
			}
		}
		v := float64(s.Value[vi])
		by[cpuComponent(stack)] += v
		total += v
		samples += s.Value[0]
	}
	if total == 0 {
		return nil
	}
	out := &CPUSplit{PerRequest: map[string]float64{}, Samples: samples}
	for c, v := range by {
		out.PerRequest[c] = v / total * msPerRequest
	}
	for _, c := range pipelineComponents {
		out.Pipeline += out.PerRequest[c]
	}
	return out
}

// componentsOrder lists components in report order.
func (s *CPUSplit) componentsOrder() []string {
	out := slices.Clone(pipelineComponents)
	out = append(out, CompGC, CompRuntime, CompServer, CompLoadGen, CompOther)
	return slices.DeleteFunc(out, func(c string) bool { return s.PerRequest[c] < 0.0005 })
}

package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// Components of a CPU profile of `e2a bench --bridge`, beside those of
// component and cpuComponent.
const (
	// CompBridge is the bridge's own work: bridge and bridge/openai
	// (nearest the leaf among the pipeline's packages) and the HTTP client
	// it calls the upstream with.
	CompBridge = "bridge"
	// CompUpstream is the in-process model server (ChatUpstream).
	CompUpstream = "upstream"
)

// Profiler labels that mark the goroutines of the in-process upstream and
// of the load generator (and those they start: their HTTP connections).
const (
	labelKey      = "bench"
	labelUpstream = "upstream"
	labelLoadGen  = "loadgen"
)

// bridgeComponents are the components of a bridge run's split, in the
// order they are printed: the bridge, the pipeline's stages, the runtime's
// shared work, then what is neither.
var bridgeComponents = []string{CompBridge, CompIngress, CompEgress, CompAgent, CompPipeline, CompNATSGo, CompHTTP,
	CompGC, CompRuntime, CompServer, CompUpstream, CompLoadGen, CompOther}

// bridgeCPUComponent attributes a CPU sample of a bridge run: the
// collector's work first; then the labelled goroutines (the upstream, the
// load generator); the embedded server; the bridge's packages when they
// are the pipeline's frame nearest the leaf (the agent runtime's writes
// called by the bridge stay the agent's); an HTTP client no label marks
// (the bridge's, the only one in the process besides the load
// generator's); else cpuComponent.
func bridgeCPUComponent(stack []string, label string) string {
	if c := cpuComponent(stack); c == CompGC {
		return c
	}
	switch label {
	case labelUpstream:
		return CompUpstream
	case labelLoadGen:
		return CompLoadGen
	}
	const pipe = "github.com/e2a-pipeline/pipeline/"
	for _, fn := range stack {
		if strings.Contains(fn, "nats-io/nats-server/") {
			return CompServer
		}
	}
	for _, fn := range stack {
		rest, ok := strings.CutPrefix(fn, pipe)
		if !ok {
			continue
		}
		if strings.HasPrefix(rest, "bridge") {
			return CompBridge
		}
		if !isSharedPkg(rest) {
			break
		}
	}
	for _, fn := range stack {
		if strings.HasPrefix(fn, "net/http.(*persistConn)") || strings.HasPrefix(fn, "net/http.(*Transport)") ||
			strings.HasPrefix(fn, "net/http.(*Client)") {
			return CompBridge
		}
	}
	return cpuComponent(stack)
}

// isSharedPkg reports a pipeline package (path after the module) that is
// no stage: what component counts for the stage that called it.
func isSharedPkg(rest string) bool {
	for _, p := range []string{"internal/bench", "agent", "egress", "ingress", "normalizer", "bridge"} {
		if strings.HasPrefix(rest, p) {
			return false
		}
	}
	return true
}

// BridgeSplit divides a system's CPU per request of a bridge run between
// components, from the CPU profiles of its rounds.
type BridgeSplit struct {
	// PerRequest maps a component to its CPU ms per request; they sum to
	// the rounds' CPU per request (process CPU time over requests, all
	// rounds together).
	PerRequest map[string]float64 `json:"per_request_ms"`
	// Samples is the number of profile samples the shares rest on.
	Samples int64 `json:"samples"`
}

// splitBridgeCPU attributes the samples of p to components, scaled to
// msPerRequest; nil when p has no sample.
func splitBridgeCPU(p *profile.Profile, msPerRequest float64) *BridgeSplit {
	if p == nil || len(p.SampleType) == 0 {
		return nil
	}
	vi := len(p.SampleType) - 1 // cpu/nanoseconds, after samples/count
	by := map[string]float64{}
	var samples int64
	total := 0.0
	for _, s := range p.Sample {
		if vi >= len(s.Value) {
			continue
		}
		var label string
		if v := s.Label[labelKey]; len(v) > 0 {
			label = v[0]
		}
		by[bridgeCPUComponent(sampleStack(s), label)] += float64(s.Value[vi])
		total += float64(s.Value[vi])
		samples += s.Value[0]
	}
	if total == 0 {
		return nil
	}
	sp := &BridgeSplit{PerRequest: map[string]float64{}, Samples: samples}
	for c, v := range by {
		sp.PerRequest[c] = v / total * msPerRequest
	}
	return sp
}

// pipelineShare is the split's CPU of the pipeline proper: its stages,
// their NATS client, net/http's server side and the embedded server (not
// the bridge, the upstream, the load generator nor the runtime's shared
// work).
func (s *BridgeSplit) pipelineShare() float64 {
	var v float64
	for _, c := range []string{CompIngress, CompEgress, CompAgent, CompPipeline, CompNATSGo, CompHTTP, CompServer} {
		v += s.PerRequest[c]
	}
	return v
}

// line prints the split on one line, components below 0.0005 ms left out.
func (s *BridgeSplit) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples:", s.Samples)
	sep := " "
	for _, c := range bridgeComponents {
		if v := s.PerRequest[c]; v >= 0.0005 {
			fmt.Fprintf(&b, "%s%s %.3f", sep, c, v)
			sep = ", "
		}
	}
	return b.String()
}

// mergeProfiles parses and merges CPU profiles (nil when there is none or
// one does not parse).
func mergeProfiles(data [][]byte) *profile.Profile {
	var ps []*profile.Profile
	for _, d := range data {
		if len(d) == 0 {
			continue
		}
		p, err := profile.Parse(bytes.NewReader(d))
		if err != nil {
			return nil
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil
	}
	m, err := profile.Merge(ps)
	if err != nil {
		return nil
	}
	return m
}

// labelled runs do under the load generator's profiler label (the
// connections its HTTP client dials inherit it).
func labelled(do doFunc) doFunc {
	labels := pprof.Labels(labelKey, labelLoadGen)
	return func(ctx context.Context, id string, start time.Time) (r result) {
		pprof.Do(ctx, labels, func(ctx context.Context) { r = do(ctx, id, start) })
		return r
	}
}

package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sample is one series of a metric: its labels and its value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Series returns the series of metric name that g gathers (a counter's,
// gauge's or untyped metric's value; a histogram's or summary's sample
// count), none when g has no such metric.
func Series(t testing.TB, g prometheus.Gatherer, name string) []Sample {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []Sample
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := Sample{Labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.Labels[lp.GetName()] = lp.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.Value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.Value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.Value = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				s.Value = float64(m.GetHistogram().GetSampleCount())
			case m.Summary != nil:
				s.Value = float64(m.GetSummary().GetSampleCount())
			}
			out = append(out, s)
		}
	}
	return out
}

package obs

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricSetDeclares checks that each constructor registers what it is
// given: name, help, type, labels and buckets, as the text exposition shows.
func TestMetricSetDeclares(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := NewMetricSet(reg, Exclusive)
	s.Counter("t_c_total", "A counter.").Inc()
	s.CounterVec("t_cv_total", "A counter vec.", "a", "b").WithLabelValues("x", "y").Add(2)
	s.GaugeVec("t_g", "A gauge vec.", "a").WithLabelValues("x").Set(3)
	s.Histogram("t_h_seconds", "A histogram.", []float64{1, 2}).Observe(1.5)
	s.HistogramVec("t_hv_seconds", "A histogram vec.", []float64{0.5}, "a").WithLabelValues("x").Observe(1)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	want := `# HELP t_c_total A counter.
# TYPE t_c_total counter
t_c_total 1
# HELP t_cv_total A counter vec.
# TYPE t_cv_total counter
t_cv_total{a="x",b="y"} 2
# HELP t_g A gauge vec.
# TYPE t_g gauge
t_g{a="x"} 3
# HELP t_h_seconds A histogram.
# TYPE t_h_seconds histogram
t_h_seconds_bucket{le="1"} 0
t_h_seconds_bucket{le="2"} 1
t_h_seconds_bucket{le="+Inf"} 1
t_h_seconds_sum 1.5
t_h_seconds_count 1
# HELP t_hv_seconds A histogram vec.
# TYPE t_hv_seconds histogram
t_hv_seconds_bucket{a="x",le="0.5"} 0
t_hv_seconds_bucket{a="x",le="+Inf"} 1
t_hv_seconds_sum{a="x"} 1
t_hv_seconds_count{a="x"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestMetricSetShared checks that a second set on the same registry gets
// the collectors of the first in Shared mode (several workers count into
// one series) and an AlreadyRegisteredError in Exclusive mode.
func TestMetricSetShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := NewMetricSet(reg, Shared).CounterVec("t_total", "T.", "pool")
	s := NewMetricSet(reg, Shared)
	if second := s.CounterVec("t_total", "T.", "pool"); second != first || s.Err() != nil {
		t.Fatalf("shared: got a new collector (%v) or an error %v", second != first, s.Err())
	}
	x := NewMetricSet(reg, Exclusive)
	x.CounterVec("t_total", "T.", "pool")
	var are prometheus.AlreadyRegisteredError
	if !errors.As(x.Err(), &are) {
		t.Fatalf("exclusive: err = %v, want AlreadyRegisteredError", x.Err())
	}
}

// TestMetricSetFirstError checks that a conflicting description is an
// error even when shared, that the first error is kept, and that nothing
// is registered after it.
func TestMetricSetFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetricSet(reg, Shared).CounterVec("t_total", "T.", "pool")
	s := NewMetricSet(reg, Shared)
	s.CounterVec("t_total", "Another help.", "pool")
	first := s.Err()
	if first == nil {
		t.Fatal("a conflicting help text was accepted")
	}
	s.Counter("t_after_total", "After.").Inc()
	if s.Err() != first {
		t.Fatalf("Err changed from %v to %v", first, s.Err())
	}
	if n, err := testutil.GatherAndCount(reg, "t_after_total"); err != nil || n != 0 {
		t.Fatalf("registered after the first error: %d series (%v)", n, err)
	}
}

// TestMetricSetNilRegisterer checks that collectors are made, usable and
// unregistered when there is no registerer.
func TestMetricSetNilRegisterer(t *testing.T) {
	s := NewMetricSet(nil, Exclusive)
	c := s.Counter("t_total", "T.")
	c.Inc()
	if got := testutil.ToFloat64(c); got != 1 || s.Err() != nil {
		t.Fatalf("value %v, err %v", got, s.Err())
	}
}

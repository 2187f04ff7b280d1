package bench

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestSlope(t *testing.T) {
	if got := slope([]float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}); math.Abs(got-2) > 1e-9 {
		t.Errorf("slope %v, want 2", got)
	}
	if got := slope([]float64{1}, []float64{1}); got != 0 {
		t.Errorf("slope of one point %v", got)
	}
}

// TestRunSoak runs a two-second soak at a low rate: every interval is
// sampled with positive numbers (no timing assertion).
func TestRunSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	rep, err := RunSoak(context.Background(), SoakConfig{Duration: 2 * time.Second, Interval: time.Second, Rate: 50, Frames: 8, FrameBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) < 2 {
		t.Fatalf("samples: %d", len(rep.Samples))
	}
	for _, s := range rep.Samples {
		if s.RPS <= 0 || s.HeapBytes == 0 || s.RSSBytes == 0 || s.StoreBytes <= 0 || s.Failed != 0 {
			t.Errorf("sample %+v", s)
		}
	}
}

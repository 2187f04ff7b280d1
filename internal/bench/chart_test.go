package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"testing"
)

// TestChartFromReport redraws the chart of a saved report when
// E2A_BENCH_REPORT names one (E2A_BENCH_CHART: the PNG to write), and
// otherwise draws one from a synthetic report.
func TestChartFromReport(t *testing.T) {
	var rep Report
	if path := os.Getenv("E2A_BENCH_REPORT"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
	} else {
		rep.Config.Protocol, rep.Config.Frames, rep.Machine.NumCPU = ProtoE2ASSE, 8, 2
		for i, f := range []float64{0.1, 0.5, 0.9} {
			rep.Sweep = append(rep.Sweep, Phase{Mode: "open", OfferedRPS: f * 1000, OK: 10,
				TTFF: Percentiles{P50: 1 + float64(i), P90: 2 + float64(i), P99: 5 * float64(i+1), P999: 9 * float64(i+1)},
				E2E:  Percentiles{P50: 3 + float64(i), P99: 20 * float64(i+1)}})
		}
		rep.Full = Phase{RPS: 1000, OK: 10, TTFF: Percentiles{P50: 10, P90: 20, P99: 40, P999: 60}, E2E: Percentiles{P50: 40, P99: 90}}
		h := rep.Sweep[1]
		rep.Half = &h
	}
	var buf bytes.Buffer
	if err := rep.WriteChart(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("E2A_BENCH_CHART"); out != "" {
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

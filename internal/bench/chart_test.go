package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"image/png"
	"io"
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

// TestWriteFile: the file holds what write wrote; write's error is
// returned (the file closed, left as far as it got); a path that cannot be
// created is an error before write runs.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/out"
	if err := WriteFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "chart"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "chart" {
		t.Fatalf("%q %v", b, err)
	}
	boom := errors.New("boom")
	if err := WriteFile(path, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("write error: %v", err)
	}
	called := false
	if err := WriteFile(dir+"/missing/out", func(io.Writer) error { called = true; return nil }); err == nil || called {
		t.Errorf("uncreatable path: %v (write called: %v)", err, called)
	}
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
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
// sampled with positive numbers (no timing assertion), each with its CPU
// profile when asked.
func TestRunSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	prof := filepath.Join(t.TempDir(), "cpu")
	rep, err := RunSoak(context.Background(), SoakConfig{Duration: 2 * time.Second, Interval: time.Second, Rate: 50,
		Protocol: ProtoA2AStream, Console: true, Frames: 8, FrameBytes: 64, CPUProfile: prof})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) < 2 {
		t.Fatalf("samples: %d", len(rep.Samples))
	}
	if profs, _ := filepath.Glob(prof + ".*"); len(profs) != len(rep.Samples) {
		t.Errorf("CPU profiles %q for %d intervals", profs, len(rep.Samples))
	} else if b, err := os.ReadFile(profs[0]); err != nil || len(b) == 0 {
		t.Errorf("CPU profile %s: %d bytes, %v", profs[0], len(b), err)
	}
	for i, s := range rep.Samples {
		if s.RPS <= 0 || s.HeapBytes == 0 || s.LiveHeapBytes == 0 || s.RSSBytes == 0 || s.StoreBytes <= 0 || s.Failed != 0 || s.TTFF.P50 <= 0 || s.CPUPerRequest <= 0 {
			t.Errorf("sample %+v", s)
		}
		// Every finished request keeps at least two subjects (its
		// envelope's and its frames'); 50 requests per interval.
		if done := uint64(50 * (i + 1)); s.Subjects < 2*done {
			t.Errorf("sample %d: %d subjects for %d requests", i, s.Subjects, done)
		}
		if s.Requests != 50*(i+1) {
			t.Errorf("sample %d: %d requests sent, want %d", i, s.Requests, 50*(i+1))
		}
	}
	if !strings.Contains(rep.Text(), "B per request sent") {
		t.Errorf("report without the live heap per request:\n%s", rep.Text())
	}
}

// TestRunSoakTrace: with Trace, an interval that has a request slower than
// TraceSlow (here every request) writes the flight recorder's window once,
// as an execution trace go tool trace reads.
func TestRunSoakTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	path := filepath.Join(t.TempDir(), "trace")
	rep, err := RunSoak(context.Background(), SoakConfig{Duration: 2 * time.Second, Interval: time.Second, Rate: 20,
		Protocol: ProtoE2ASSE, Frames: 2, FrameBytes: 16, Trace: path, TraceSlow: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + ".*")
	if len(files) != len(rep.Samples) {
		t.Fatalf("traces %q for %d intervals", files, len(rep.Samples))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
			t.Errorf("%s: not an execution trace (%.20q, %v)", f, b, err)
		}
	}
}

// TestRunSoakOwnServer: with NATSURL the soak's stages use that server (a
// real one on a TCP port, its streams provisioned by the soak) and embed
// none: every request answered, the subjects counted on it, no store read.
func TestRunSoakOwnServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	srv, nc := natstest.RunServer(t, natstest.WithoutStreams())
	rep, err := RunSoak(context.Background(), SoakConfig{Duration: 2 * time.Second, Interval: time.Second, Rate: 50,
		Protocol: ProtoE2ASSE, Frames: 8, FrameBytes: 64, NATSURL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) < 2 {
		t.Fatalf("samples: %d", len(rep.Samples))
	}
	for i, s := range rep.Samples {
		if s.RPS <= 0 || s.Failed != 0 || s.StoreBytes != 0 || s.TTFF.P50 <= 0 {
			t.Errorf("sample %+v", s)
		}
		if done := uint64(50 * (i + 1)); s.Subjects < 2*done {
			t.Errorf("sample %d: %d subjects for %d requests", i, s.Subjects, done)
		}
	}
	// The requests were stored on the given server.
	si, err := natstest.JetStream(t, nc).Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := si.CachedInfo().State.Msgs; n < 100 {
		t.Errorf("%s on the given server holds %d requests, want the soak's 100 or more", streams.RequestsStream, n)
	}
	if !strings.Contains(rep.Text(), "NATS server in its own process") {
		t.Errorf("report does not say where the server ran:\n%s", rep.Text())
	}
}

// TestStartPipelineUnreachableServer: a NATSURL nothing listens on is an
// error, not a panic (the failed start closes what it had started).
func TestStartPipelineUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + ln.Addr().String()
	ln.Close() // the port is free: nothing answers there
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if p, err := StartPipeline(ctx, PipelineOptions{NATSURL: url}); err == nil || p != nil {
		t.Fatalf("StartPipeline(%s) = %v, %v; want an error", url, p, err)
	}
}

// TestPipelineConsole: with Console, the console's indexer runs beside the
// stages and indexes the bench's requests, as under e2a dev.
func TestPipelineConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := StartPipeline(ctx, PipelineOptions{Frames: 4, FrameBytes: 16, Console: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cl := &client{base: p.URL, proto: ProtoE2ASSE, hc: newHTTPClient(8), sessions: make(chan string, 8),
		params: map[string]any{"frames": 4, "frame_bytes": 16}, expectFrames: 4}
	ph := closedLoop(ctx, "c", 10, 2, &idGen{prefix: "console"}, func(ctx context.Context, id string, start time.Time) result {
		return cl.do(ctx, id, start)
	}, false, false)
	if ph.OK != 10 {
		t.Fatalf("%+v", ph)
	}
	js, err := jetstream.New(p.NC)
	if err != nil {
		t.Fatal(err)
	}
	// The index's request records (on the records' shared subjects q.*).
	s, err := js.Stream(ctx, "KV_"+console.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "10 requests indexed", func() bool {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter("$KV."+console.Bucket+".q.>"))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range info.State.Subjects {
			n += c
		}
		return n >= 10
	})
}

// TestPipelineRetention: the soak's --retention sets the hot streams' max
// age and the task index's TTL, and cuts the dedupe window (one setting of
// the three) to it; E2A_CONTROL keeps its age.
func TestPipelineRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := StartPipeline(ctx, PipelineOptions{Frames: 2, FrameBytes: 16, Retention: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	js, err := jetstream.New(p.NC)
	if err != nil {
		t.Fatal(err)
	}
	def := streams.DefaultConfig()
	for name, want := range map[string]struct{ age, dup time.Duration }{
		streams.RequestsStream:      {90 * time.Second, 90 * time.Second},
		streams.ResponsesStream:     {90 * time.Second, 90 * time.Second},
		streams.ControlStream:       {def.ControlMaxAge, 90 * time.Second},
		"KV_" + streams.TasksBucket: {90 * time.Second, 0},
	} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		if c.MaxAge != want.age || want.dup != 0 && c.Duplicates != want.dup {
			t.Errorf("%s: max age %v, duplicates %v; want %v, %v", name, c.MaxAge, c.Duplicates, want.age, want.dup)
		}
	}
	if _, err := RunSoak(ctx, SoakConfig{Duration: time.Second, Rate: 1, Retention: -time.Second}); err == nil {
		t.Error("a negative retention was accepted")
	}
}

// TestSoakTextFailures: a soak's failures are reported by message, with
// the interval each first appeared in (a soak that fills E2A_REQUESTS
// reports why its requests fail, not only how many).
func TestSoakTextFailures(t *testing.T) {
	rep := &SoakReport{Config: SoakConfig{Protocol: ProtoE2ASSE, Duration: time.Minute, Rate: 10, Interval: 30 * time.Second, Retention: time.Minute},
		Samples: []SoakSample{
			{At: 30, RPS: 10},
			{At: 60, RPS: 5, Failed: 3, Errors: map[string]int{"HTTP 503: full": 2, "timeout": 1}},
			{At: 90, Failed: 4, Errors: map[string]int{"HTTP 503: full": 4}},
		}}
	txt := rep.Text()
	for _, want := range []string{"hot streams kept 1m0s", "failed from 60s: 6 × HTTP 503: full\n", "failed from 60s: 1 × timeout\n"} {
		if !strings.Contains(txt, want) {
			t.Errorf("report lacks %q:\n%s", want, txt)
		}
	}
	if got := firstError(rep.Samples[1].Errors); got != " (2 × HTTP 503: full)" {
		t.Errorf("firstError = %q", got)
	}
	if got := firstError(nil); got != "" {
		t.Errorf("firstError(nil) = %q", got)
	}
}

// TestClientRefusalCountsOnce: an HTTP refusal's body is reported without
// the request's own id (a JSON-RPC error echoes it), so a full E2A_REQUESTS
// refusing every request of a soak is one kind of failure in the report,
// not eight distinct ones and the rest uncounted.
func TestClientRefusalCountsOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%q,"error":{"code":-32603,"message":"full"}}`, req.ID)
	}))
	defer srv.Close()
	cl := &client{base: srv.URL, proto: ProtoA2AStream, hc: srv.Client(), params: map[string]any{}}
	col := newCollector(20, false)
	for i := range 20 {
		id := fmt.Sprintf("req-%d", i)
		col.add(id, cl.do(context.Background(), id, time.Now()))
	}
	ph := col.phase("p", "open", 1, 1, time.Second, time.Millisecond, nil, nil)
	want := `HTTP 503: {"jsonrpc":"2.0","id":"<id>","error":{"code":-32603,"message":"full"}}`
	if ph.Failed != 20 || len(ph.Errors) != 1 || ph.Errors[want] != 20 {
		t.Errorf("failed %d, errors %v; want 20 × %s", ph.Failed, ph.Errors, want)
	}
}

// TestRunSoakRateBound: a soak's rate is bounded as --rates' is, (0, 1e6]
// requests/s, refused before the pipeline starts: an interval's requests
// are allocated up front, and `e2a bench --duration 1s --rate 1e12`
// crashed the process (fatal error: runtime: out of memory).
func TestRunSoakRateBound(t *testing.T) {
	_, err := RunSoak(context.Background(), SoakConfig{Duration: time.Second, Interval: time.Second, Rate: 1e12, Protocol: ProtoE2ASSE})
	if err == nil || !strings.Contains(err.Error(), "--rate") {
		t.Fatalf("RunSoak at 1e12 requests/s: %v, want the rate refused", err)
	}
}

// TestCollectorPreallocBound: a collector makes room for at most
// maxPrealloc results up front, the rest growing with the requests made:
// an open-loop phase's size is its rate × seconds, and `e2a bench --rates
// 1000 --sweep-seconds 1e12` crashed the process (fatal error: runtime:
// out of memory) before its first request.
func TestCollectorPreallocBound(t *testing.T) {
	c := newCollector(1<<50, false)
	if cap(c.ttff) > maxPrealloc || cap(c.e2e) > maxPrealloc {
		t.Fatalf("room for %d and %d results, want at most %d", cap(c.ttff), cap(c.e2e), maxPrealloc)
	}
}

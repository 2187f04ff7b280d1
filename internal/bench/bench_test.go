package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestRunSmall runs every phase with a few requests, on both E2A formats
// and the JSON-RPC protocols, and checks that the report is complete and
// consistent.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a pipeline")
	}
	for _, proto := range Protocols {
		t.Run(proto, func(t *testing.T) {
			cfg := Config{
				Protocol: proto, Requests: 120, Concurrency: 8, Frames: 8, FrameBytes: 40,
				Warmup: 20, Sweep: []float64{0.5}, SweepSeconds: 0.2, ReplayOpens: 60,
				BaselineMsgs: 2000, Timeout: 20 * time.Second, WarmMemoryMiB: 8,
				Trace: filepath.Join(t.TempDir(), "half.trace"),
			}
			if proto == ProtoE2ASSE {
				cfg.Rates = []float64{400}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Full.OK != cfg.Requests || rep.Full.Failed != 0 || rep.Full.SequenceErrors != 0 {
				t.Fatalf("full load: %+v", rep.Full)
			}
			if proto == ProtoE2ASSE || proto == ProtoE2ANDJSON {
				if rep.Full.Frames != int64(cfg.Requests*cfg.Frames) {
					t.Errorf("%d frames, want %d", rep.Full.Frames, cfg.Requests*cfg.Frames)
				}
			}
			if rep.Baseline == nil || rep.Baseline.MsgsPerSec <= 0 || rep.Ratio <= 0 {
				t.Errorf("baseline %+v ratio %v", rep.Baseline, rep.Ratio)
			}
			if rep.Half == nil || rep.Half.OK == 0 || rep.Half.Failed != 0 {
				t.Errorf("half load: %+v", rep.Half)
			}
			// A fixed rate runs its own phase, at that rate whatever the
			// full load was: 200 requests at least.
			if len(cfg.Rates) > 0 {
				i := slices.IndexFunc(rep.Sweep, func(p Phase) bool { return p.Name == "400/s" })
				if i < 0 || rep.Sweep[i].OfferedRPS != 400 || rep.Sweep[i].OK != 200 || rep.Sweep[i].Failed != 0 {
					t.Errorf("fixed-rate phase missing or wrong: %+v", rep.Sweep)
				}
			}
			// The half-load phase's execution trace: a file go tool trace
			// reads (its header names the Go version).
			if b, err := os.ReadFile(cfg.Trace); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1024 {
				t.Errorf("trace of the half-load phase: %d bytes, %v", len(b), err)
			}
			if rep.Replay == nil || rep.Replay.OK != cfg.ReplayOpens || rep.ReplayEngine == nil || rep.ReplayEngine.OK != cfg.ReplayOpens {
				t.Errorf("replay %+v engine %+v", rep.Replay, rep.ReplayEngine)
			}
			if p := rep.Full.TTFF; p.P50 <= 0 || p.P50 > p.P99 || p.P99 > p.P999 || p.P999 > p.Max {
				t.Errorf("TTFF percentiles not ordered: %+v", p)
			}
			// A 120-request phase may hold no CPU sample (100 Hz): the
			// split's arithmetic is checked when there is one, its
			// attribution by TestSplitCPU.
			if s := rep.Full.CPU; s != nil {
				sum := 0.0
				for _, v := range s.PerRequest {
					sum += v
				}
				if d := sum - rep.Full.CPUPerRequest; d*d > 1e-6*sum*sum || s.Pipeline > sum*(1+1e-9) {
					t.Errorf("CPU split sums to %.4f ms, pipeline %.4f, of %.4f ms/request", sum, s.Pipeline, rep.Full.CPUPerRequest)
				}
			}
			if rep.Full.AllocsPerRequest <= 0 {
				t.Errorf("allocs/request %v", rep.Full.AllocsPerRequest)
			}
			if s := rep.Full.Allocs; s == nil || s.Pipeline <= 0 || s.Samples == 0 {
				t.Errorf("allocation split %+v", s)
			} else {
				sum := 0.0
				for _, v := range s.PerRequest {
					sum += v
				}
				if d := sum - rep.Full.AllocsPerRequest; d*d > 1e-6*sum*sum || s.Pipeline > sum*(1+1e-9) {
					t.Errorf("split sums to %.1f, pipeline %.1f, of %.1f allocs/request", sum, s.Pipeline, rep.Full.AllocsPerRequest)
				}
			}
			if len(rep.Targets) != 3 {
				t.Errorf("targets %+v", rep.Targets)
			}
			var js bytes.Buffer
			if err := rep.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
				t.Fatalf("JSON: %v", err)
			}
			var txt bytes.Buffer
			if w := rep.MemoryWarmup; w == nil || w.MiB != 8 {
				t.Errorf("memory warm-up %+v", w)
			}
			if err := rep.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "raw JetStream async publish") ||
				!strings.Contains(txt.String(), "memory warmed before the run: 8 MiB") {
				t.Fatalf("text: %v\n%s", err, txt.String())
			}
			var img bytes.Buffer
			if err := rep.WriteChart(&img); err != nil {
				t.Fatal(err)
			}
			if m, err := png.Decode(&img); err != nil || m.Bounds().Dx() != chartW {
				t.Fatalf("chart: %v", err)
			}
		})
	}
}

// TestConfigRejectsBadLoads: sweep fractions and fixed rates outside their
// ranges, and negative sweep seconds, baseline bytes or agent concurrency,
// are refused before anything starts.
func TestConfigRejectsBadLoads(t *testing.T) {
	for name, set := range map[string]func(*Config){
		"sweep 0":   func(c *Config) { c.Sweep = []float64{0} },
		"sweep 3":   func(c *Config) { c.Sweep = []float64{3} },
		"rate 0":    func(c *Config) { c.Rates = []float64{0} },
		"rate -5":   func(c *Config) { c.Rates = []float64{-5} },
		"rate 2e6":  func(c *Config) { c.Rates = []float64{2e6} },
		"rate okay": func(c *Config) { c.Rates = []float64{100, 1154} },
		// Taken for their defaults without a word.
		"sweep seconds -1":     func(c *Config) { c.SweepSeconds = -1 },
		"baseline bytes -1":    func(c *Config) { c.BaselineBytes = -1 },
		"agent concurrency -1": func(c *Config) { c.AgentConcurrency = -1 },
	} {
		c := DefaultConfig()
		set(&c)
		err := c.fill()
		if (err == nil) != (name == "rate okay") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPercentiles(t *testing.T) {
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(1000-i) * time.Millisecond
	}
	p := percentiles(d)
	if p.P50 != 500 || p.P90 != 900 || p.P99 != 990 || p.P999 != 999 || p.Max != 1000 {
		t.Fatalf("%+v", p)
	}
	if (percentiles(nil) != Percentiles{}) {
		t.Fatal("empty")
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		proto, msg, id, ev  string
		frame, final, isErr bool
		seq                 int64
	}{
		{ProtoE2ASSE, `{"sequence":3,"is_final":true}`, "3", "e2a.complete", true, true, false, 3},
		{ProtoE2ASSE, `{"error":{}}`, "", "error", false, false, true, -1},
		{ProtoE2ANDJSON, `{"request_id":"x","sequence":12,"is_final":false}`, "", "", true, false, false, 12},
		{ProtoE2ANDJSON, `{"error":{"code":"x"}}`, "", "", false, false, true, -1},
		{ProtoA2AStream, `{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","final":true}}`, "", "", true, true, false, -1},
		{ProtoA2AStream, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001}}`, "", "", false, false, true, -1},
		{ProtoACP, `{"jsonrpc":"2.0","method":"session/update","params":{}}`, "", "", true, false, false, -1},
		{ProtoACP, `{"jsonrpc":"2.0","id":"a","result":{"stopReason":"end_turn"}}`, "", "", true, true, false, -1},
	}
	for _, c := range cases {
		frame, final, seq, err := classify(c.proto, []byte(c.msg), c.id, c.ev)
		if frame != c.frame || final != c.final || seq != c.seq || (err != nil) != c.isErr {
			t.Errorf("%s %s: frame %v final %v seq %d err %v", c.proto, c.msg, frame, final, seq, err)
		}
	}
}

// TestTargetsNotMetWithFailures: a target is met only by a phase none of
// whose requests failed: its figures are taken over the successful
// requests (a request that timed out, the slowest of all, is not in the
// p99), so half the requests failing must not read MET.
func TestTargetsNotMetWithFailures(t *testing.T) {
	half := Phase{Name: "50%", Mode: "open", OfferedRPS: 1000, Requests: 200, OK: 100, Failed: 100,
		TTFF:   Percentiles{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5},
		Errors: map[string]int{"context deadline exceeded": 100}}
	replay := Phase{Name: "replay", Requests: 100, OK: 99, Failed: 1, RPS: 9000}
	full := Phase{RPS: 6000, OK: 100, Requests: 100}
	rep := &Report{InProc: true, Config: DefaultConfig(), Full: full, Half: &half, Replay: &replay}
	tgs := targets(rep)
	if len(tgs) != 3 {
		t.Fatalf("targets %+v", tgs)
	}
	for _, tg := range tgs {
		switch {
		case tg.What == "requests/s at full load" && !tg.Met:
			t.Errorf("target %q not met at %.0f requests/s with no failure", tg.What, tg.Got)
		case tg.What != "requests/s at full load" && (tg.Met || !strings.Contains(tg.Notes, "failed")):
			t.Errorf("target %q: met %v (got %.2f), notes %q, although requests of its phase failed", tg.What, tg.Met, tg.Got, tg.Notes)
		}
	}
	rep.Full.Failed, rep.Full.Requests = 1, 101
	if tg := targets(rep)[0]; tg.Met {
		t.Errorf("target %q met with a failed request", tg.What)
	}
	half.Failed, half.Requests = 0, 100
	if tg := targets(rep)[1]; !tg.Met {
		t.Errorf("target %q not met (got %.2f ms) with no failure", tg.What, tg.Got)
	}
}

// TestTextReportListsReplayEngineErrors: the text report's errors section
// lists every phase's failures, the replay engine's too, whose row shows
// them failed.
func TestTextReportListsReplayEngineErrors(t *testing.T) {
	eng := Phase{Name: "replay-engine", Mode: "closed", Concurrency: 4, Requests: 10, OK: 7, Failed: 3,
		Errors: map[string]int{"5 frames, expected 8": 3}}
	rep := &Report{InProc: true, Config: DefaultConfig(), Full: Phase{Name: "full", OK: 10, Requests: 10}, ReplayEngine: &eng}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "replay-engine: 3 × 5 frames, expected 8") {
		t.Errorf("the replay engine's 3 failures are in its row but not in the errors section:\n%s", b.String())
	}
}

func TestSSEEvent(t *testing.T) {
	in := "retry: 2000\n: ok\n\nid: 0\nevent: e2a.chunk\ndata: {\"a\":1}\n\nid: 1\ndata: x\ndata: y\n\n"
	rd := bufio.NewReader(strings.NewReader(in))
	var ev sseEvent
	var got []string
	for {
		line, err := readLine(rd)
		if err != nil {
			break
		}
		if ev.line(line) {
			if len(ev.data) > 0 {
				got = append(got, ev.id+"|"+ev.event+"|"+string(ev.data))
			}
			ev.reset()
		}
	}
	want := []string{`0|e2a.chunk|{"a":1}`, "1||x\ny"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestBodyTemplates(t *testing.T) {
	for _, proto := range Protocols {
		c := &client{proto: proto, params: map[string]any{"frames": 8, "text": "x"}}
		b, path, err := c.body("req-1", "sess-9")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v\n%s", proto, err, b)
		}
		if !strings.HasPrefix(path, "/") || !bytes.Contains(b, []byte(`"req-1"`)) {
			t.Fatalf("%s: %s %s", proto, path, b)
		}
		want := `"req-1"`
		if proto == ProtoACP {
			want = `"sess-9"`
		}
		if bytes.Count(b, []byte(want)) < 1 || bytes.Contains(b, []byte(`\u0000`)) {
			t.Fatalf("%s: %s", proto, b)
		}
	}
}

// TestComponent: an allocation is the server's wherever the server is on
// its stack, else the pipeline package nearest the leaf's, else the NATS
// client's, net/http's side, the load generator's.
func TestComponent(t *testing.T) {
	for stack, want := range map[string]string{
		"runtime.gcDrain runtime.gcBgMarkWorker":                                  CompGC,
		"runtime.findRunnable runtime.schedule":                                   CompRuntime,
		"runtime.mallocgc github.com/e2a-pipeline/pipeline/egress.(*Reader).Next": CompEgress,
	} {
		if got := cpuComponent(strings.Fields(stack)); got != want {
			t.Errorf("CPU %s: %s, want %s", stack, got, want)
		}
	}
	const p = "github.com/e2a-pipeline/pipeline/"
	cases := []struct {
		stack []string
		want  string
	}{
		{[]string{"encoding/json.Unmarshal", p + "egress.readTextChunk", p + "ingress.(*Server).serveRPC", "net/http.(*conn).serve"}, CompEgress},
		{[]string{"encoding/json.Unmarshal", "github.com/nats-io/nats.go/jetstream.(*jetStream).publishMsg", p + "agent.(*writer).publish", p + "internal/bench.benchAgent.Serve"}, CompAgent},
		{[]string{"bytes.growSlice", p + "normalizer.(*req).finish", p + "protocols/a2a.(*frontDoor).serve", p + "ingress.(*Server).serveRPC"}, CompIngress},
		{[]string{"runtime.makeslice", "github.com/nats-io/nats-server/v2/server.(*client).processInboundClientMsg", "github.com/nats-io/nats.go.(*Conn).readLoop"}, CompServer},
		{[]string{"github.com/nats-io/nats%2ego.(*Conn).processMsg", "github.com/nats-io/nats%2ego.(*Conn).readLoop"}, CompNATSGo},
		{[]string{"net/textproto.readMIMEHeader", "net/http.(*persistConn).readResponse"}, CompLoadGen},
		{[]string{"net/textproto.readMIMEHeader", "net/http.readRequest", "net/http.(*conn).serve"}, CompHTTP},
		{[]string{"encoding/json.Unmarshal", p + "internal/bench.classify", p + "internal/bench.(*client).do"}, CompLoadGen},
		{[]string{"bytes.growSlice", p + "streams.(*DirectGetter).Get"}, CompPipeline},
		{[]string{"encoding/json.Marshal", p + "egress/console.(*indexer).indexRequests"}, CompConsole},
		{[]string{"encoding/json.Unmarshal", p + "e2a.FromJSON", p + "agent.(*worker).handle"}, CompAgent},
		{[]string{"runtime.malg", "runtime.newproc1"}, CompOther},
	}
	for _, c := range cases {
		if got := component(c.stack); got != c.want {
			t.Errorf("%v: %s, want %s", c.stack, got, c.want)
		}
	}
}

// TestSplitCPU: CPU samples are attributed by stack (leaf first, inlined
// frames included) and scaled to the measured CPU per request.
func TestSplitCPU(t *testing.T) {
	const pipe = "github.com/e2a-pipeline/pipeline/"
	fn := map[string]*profile.Function{}
	loc := func(names ...string) *profile.Location {
		l := &profile.Location{ID: uint64(len(fn) + 100)}
		for _, n := range names { // innermost first, as the profile records inlining
			f, ok := fn[n]
			if !ok {
				f = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
				fn[n] = f
			}
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	egress := loc("encoding/json.Unmarshal", pipe+"egress.readTextChunk")
	server := loc("github.com/nats-io/nats-server/v2/server.(*stream).processJetStreamMsg")
	gc := loc("runtime.gcDrain")
	gcw := loc("runtime.gcBgMarkWorker")
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Period:     10_000_000, PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{egress}, Value: []int64{3, 30_000_000}},
			{Location: []*profile.Location{server}, Value: []int64{1, 10_000_000}},
			{Location: []*profile.Location{gc, gcw}, Value: []int64{1, 10_000_000}},
		},
	}
	for _, f := range fn {
		p.Function = append(p.Function, f)
	}
	p.Location = []*profile.Location{egress, server, gc, gcw}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	s := splitCPU(buf.Bytes(), 1.0)
	if s == nil || s.Samples != 5 {
		t.Fatalf("split %+v", s)
	}
	for c, want := range map[string]float64{CompEgress: 0.6, CompServer: 0.2, CompGC: 0.2} {
		if d := s.PerRequest[c] - want; d*d > 1e-12 {
			t.Errorf("%s: %.3f ms, want %.3f", c, s.PerRequest[c], want)
		}
	}
	if d := s.Pipeline - 0.6; d*d > 1e-12 {
		t.Errorf("pipeline %.3f, want 0.6", s.Pipeline)
	}
}

// FuzzScanRPC checks the load generator's JSON-RPC scan against
// encoding/json: on valid JSON that it reads, it reads what json.Unmarshal
// into rpcMsg reads, and it never panics on anything.
func FuzzScanRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","final":true}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"kind":"artifact-update","artifact":{"parts":[{"kind":"text","text":"a\"}b"}]},"final":false}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{}}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"stopReason":"end_turn"}}`,
		`{"id":null,"result":null,"error":null}`, `{"Result":{"final":true}}`, `{"result":{"FINAL":true}}`,
		`{"result":"x"}`, `{"method":3}`, `{"result":{"kind":1}}`, `[1]`, `{"a`, `{"result":{"final":tru`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, ok := scanRPC(msg)
		if !ok || !json.Valid(msg) {
			return
		}
		var m rpcMsg
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("scan read %q, json.Unmarshal refused it: %v", msg, err)
		}
		want := rpcHead{id: len(m.ID) > 0, method: m.Method != "", err: m.Error,
			result: m.Result != nil, final: m.Result != nil && m.Result.Final}
		if h.id != want.id || h.method != want.method || h.result != want.result || h.final != want.final ||
			!bytes.Equal(h.err, want.err) {
			t.Fatalf("%q: scan %+v, json.Unmarshal %+v", msg, h, want)
		}
	})
}

package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock advances only when slept on; it records every sleep.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 12, 17, 10, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// mapResolver answers host names from a table.
type mapResolver map[string][]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range m[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return out, nil
}

const testSecret = "sk-live-7f3a9c1e5b2d4f6a8c0e"

// testAPI is the local API the workflows call.
type testAPI struct {
	*httptest.Server
	flaky      atomic.Int32 // failures left for /flaky
	hits       sync.Map     // path → *atomic.Int32
	lastAuth   atomic.Value
	redirectTo atomic.Value
}

func (a *testAPI) hit(p string) int32 {
	v, _ := a.hits.LoadOrStore(p, new(atomic.Int32))
	return v.(*atomic.Int32).Load()
}

func newTestAPI(t testing.TB) *testAPI {
	a := &testAPI{}
	mux := http.NewServeMux()
	count := func(r *http.Request) {
		v, _ := a.hits.LoadOrStore(r.Method+" "+r.URL.Path, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	js := func(w http.ResponseWriter, code int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
	mux.HandleFunc("GET /users", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 200, users) })
	mux.HandleFunc("POST /users", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 201, `{"created":true}`) })
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		js(w, 200, fmt.Sprintf(`{"id":%q,"profile":"p-%s","raw":%q}`, r.PathValue("id"), r.PathValue("id"), r.URL.EscapedPath()))
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 200, `3`) })
	mux.HandleFunc("GET /zero", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 200, `0`) })
	mux.HandleFunc("GET /data", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 200, `{"value":42}`) })
	mux.HandleFunc("GET /text", func(w http.ResponseWriter, r *http.Request) { count(r); _, _ = io.WriteString(w, "plain text") })
	mux.HandleFunc("GET /flaky", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		if a.flaky.Add(-1) >= 0 {
			js(w, 503, `{"error":"unavailable"}`)
			return
		}
		js(w, 200, `{"ok":true}`)
	})
	mux.HandleFunc("GET /limited", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		if a.hit("GET /limited") == 1 {
			w.Header().Set("Retry-After", "7")
			js(w, 429, `{"error":"slow down"}`)
			return
		}
		js(w, 200, `{"ok":true}`)
	})
	for path, after := range map[string]string{"/limited-long": "3600", "/limited-huge": "9223372037"} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			count(r)
			w.Header().Set("Retry-After", after)
			js(w, 429, `{"error":"slow down"}`)
		})
	}
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 404, `{"error":"not found"}`) })
	mux.HandleFunc("GET /timeout", func(w http.ResponseWriter, r *http.Request) { count(r); js(w, 408, `{}`) })
	mux.HandleFunc("GET /echo", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		a.lastAuth.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Api-Key"))
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		b, _ := json.Marshal(map[string]any{"headers": h})
		js(w, 200, string(b))
	})
	mux.HandleFunc("GET /echo-error", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		js(w, 500, `{"error":"bad token `+r.Header.Get("Authorization")+`"}`)
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		js(w, 200, `"`+strings.Repeat("x", 4096)+`"`)
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		http.Redirect(w, r, a.redirectTo.Load().(string), http.StatusFound)
	})
	mux.HandleFunc("POST /echo-body", func(w http.ResponseWriter, r *http.Request) {
		count(r)
		b, _ := io.ReadAll(r.Body)
		js(w, 200, fmt.Sprintf(`{"got":%s,"ct":%q}`, b, r.Header.Get("Content-Type")))
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

// recorder is an Observer keeping every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Event(_ context.Context, ev Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) ends() []Event {
	var out []Event
	for _, e := range r.events {
		if e.Phase == PhaseEnd {
			out = append(out, e)
		}
	}
	return out
}

type env struct {
	api   *testAPI
	clock *fakeClock
	e     *Executor
	vault *Vault
}

func newEnv(t testing.TB, mod func(*Options)) *env {
	t.Helper()
	api := newTestAPI(t)
	clock := newFakeClock()
	v := NewVault()
	if err := v.Add(Credential{ID: "api-key-123", Value: Secret(testSecret), Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	_ = v.Add(Credential{ID: "other-agent-key", Value: "zzz-other-secret-value", Principals: []string{"someone-else"}})
	opts := Options{
		Policy: examplePolicy(t, "127.0.0.1"), // the local test API, allowed explicitly
		Vault:  v, Clock: clock,
		Retry: RetryPolicy{MaxRetries: 3, InitialDelay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: true, Rand: func() float64 { return 1 }},
	}
	if mod != nil {
		mod(&opts)
	}
	return &env{api: api, clock: clock, e: New(opts), vault: v}
}

// run validates and executes wf (with https://api.example.com replaced by
// the local API) as principal agent-1.
func (en *env) run(t testing.TB, wf string) (*Outcome, *recorder) {
	t.Helper()
	wf = strings.ReplaceAll(wf, "https://api.example.com", en.api.URL)
	w, res := en.e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("invalid workflow: %+v", res.Errors)
	}
	rec := &recorder{}
	out, err := en.e.Execute(context.Background(), "agent-1", "req-1", w, rec)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return out, rec
}

func TestSpecExamplesEndToEnd(t *testing.T) {
	en := newEnv(t, nil)
	out, rec := en.run(t, example1)
	if out.Status != StatusSuccess || out.WorkflowExecutionID != "exec-1" || out.ExecutionID != "req-1" {
		t.Fatalf("example 1: %+v", out)
	}
	eqJSON(t, out.Results["fetch-data"], `{"value":42}`)
	if len(rec.events) != 2 || rec.events[0].Phase != PhaseStart || rec.events[1].OutputPath != "/workflow/data" {
		t.Errorf("events: %+v", rec.events)
	}

	out, _ = en.run(t, example2)
	if out.Status != StatusSuccess {
		t.Fatalf("example 2: %+v", out.Error)
	}
	if got := ids(t, out.Results["filter-active"]); got != "1,3,4" {
		t.Errorf("example 2 filter: %s", got)
	}

	// example 3, completed with the two operations it references
	ex3 := example3 + "\n"
	ex3 = strings.Replace(ex3, `{"type":"beginExecution"`, lines(
		op("process-data", `{"TransformData":{"inputPath":"/workflow/count","transform":"select","config":{"fields":["x"]},"outputPath":"/workflow/processed"}}`),
		op("skip", `{"Wait":{"duration":0}}`))+"\n"+`{"type":"beginExecution"`, 1)
	ex3 = strings.Replace(ex3, `"transform":"select","config":{"fields":["x"]}`, `"transform":"aggregate","config":{"operation":"count"}`, 1)
	ex3a := strings.ReplaceAll(ex3, "/count", "/zero")
	ex3a = strings.ReplaceAll(ex3a, `"/workflow/zero"`, `"/workflow/count"`)
	_, res := en.e.Validate("agent-1", strings.ReplaceAll(ex3, "https://api.example.com", en.api.URL))
	if !res.Valid {
		t.Fatalf("example 3 completed: %+v", res.Errors)
	}
	// count is 3 (a number, not an array): ifTrue runs and fails on type
	out, _ = en.run(t, ex3)
	if out.Status != StatusFailed || out.Error.Type != DataError || out.Error.OperationID != "process-data" {
		t.Errorf("example 3 (count 3): %+v", out.Error)
	}
	// count 0: ifFalse runs
	out, _ = en.run(t, ex3a)
	if out.Status != StatusSuccess {
		t.Fatalf("example 3 (count 0): %+v", out.Error)
	}
	eqJSON(t, out.Results["process-if-needed"], `{"condition":false,"branch":"ifFalse","executed":["skip"]}`)
}

func TestPipelineOfOperations(t *testing.T) {
	dir := t.TempDir()
	en := newEnv(t, func(o *Options) { o.Storage = &Stores{Dir: dir} })
	wf := lines(
		op("fetch", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("active", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"status","operator":"==","value":"active"}],"outputPath":"/workflow/active"}}`),
		op("sorted", `{"TransformData":{"inputPath":"/workflow/active","transform":"sort","config":{"field":"name","order":"desc"},"outputPath":"/workflow/sorted"}}`),
		op("names", `{"TransformData":{"inputPath":"/workflow/sorted","transform":"map","config":{"field":"name"},"outputPath":"/workflow/names"}}`),
		op("total", `{"TransformData":{"inputPath":"/workflow/users","transform":"aggregate","config":{"operation":"sum","field":"points"},"outputPath":"/workflow/total"}}`),
		op("each", `{"Loop":{"inputPath":"/workflow/active","operations":["profile"],"outputPath":"/workflow/profiles"}}`),
		op("profile", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users/{/workflow/_loop/item.id}","outputPath":"/workflow/profile"}}`),
		op("merged", `{"MergeData":{"sources":["/workflow/active","/workflow/profiles"],"strategy":"deepMerge","outputPath":"/workflow/merged"}}`),
		op("big", `{"Conditional":{"condition":{"path":"/workflow/total","operator":">=","value":200},"ifTrue":["save"],"ifFalse":["pause"]}}`),
		op("save", `{"StoreData":{"inputPath":"/workflow/names","storage":"file","key":"reports/names.json"}}`),
		op("pause", `{"Wait":{"duration":2500}}`),
		begin("fetch", "active", "sorted", "names", "total", "each", "merged", "big"))
	out, rec := en.run(t, wf)
	if out.Status != StatusSuccess {
		t.Fatalf("%+v", out.Error)
	}
	eqJSON(t, out.Results["names"], `["Dee","Cy","Ann"]`)
	eqJSON(t, out.Results["total"], `290`)
	merged := out.Results["merged"].([]any)
	if len(merged) != 3 || merged[0].(map[string]any)["profile"] != "p-1" || merged[2].(map[string]any)["profile"] != "p-4" {
		t.Errorf("merged: %s", canonical(merged))
	}
	b, err := os.ReadFile(filepath.Join(dir, "agent-1", "reports", "names.json"))
	if err != nil || string(b) != `["Dee","Cy","Ann"]` {
		t.Errorf("stored file: %q %v", b, err)
	}
	// loop iterations are reported with their index and parent
	var iters []int
	for _, ev := range rec.ends() {
		if ev.OperationID == "profile" {
			if ev.Parent != "each" || ev.Iteration == nil {
				t.Errorf("loop event %+v", ev)
			} else {
				iters = append(iters, *ev.Iteration)
			}
		}
	}
	if fmt.Sprint(iters) != "[0 1 2]" {
		t.Errorf("iterations %v", iters)
	}
	if en.clock.Sleeps() != nil {
		t.Errorf("unexpected sleeps %v", en.clock.Sleeps())
	}
}

func TestWaitUsesClockAndBudget(t *testing.T) {
	en := newEnv(t, nil)
	out, _ := en.run(t, lines(op("w", `{"Wait":{"duration":2500}}`), begin("w")))
	if out.Status != StatusSuccess || fmt.Sprint(en.clock.Sleeps()) != "[2.5s]" || out.DurationMs != 2500 {
		t.Errorf("wait: %+v sleeps %v", out, en.clock.Sleeps())
	}
	// two waits of 20 s pass the budget of 30 s: the second fails with a
	// TimeoutError, not retryable though spec §10 lists timeout errors as
	// retryable: the Waits alone pass the budget, so every run ends so
	// (validation refuses it too). A timeout that a slow API or worker
	// caused is retryable (TestTimeoutRetryable).
	wf := lines(op("w1", `{"Wait":{"duration":20000}}`), op("w2", `{"Wait":{"duration":20000}}`), begin("w1", "w2"))
	w, res := en.e.Validate("agent-1", wf)
	if res.Valid {
		t.Fatal("static budget not checked")
	}
	out, _ = en.e.Execute(context.Background(), "agent-1", "r", w, nil)
	if out.Status != StatusFailed || out.Error.Type != TimeoutError || out.Error.OperationID != "w2" || out.Error.Retryable {
		t.Errorf("budget: %+v", out.Error)
	}
}

func TestMaxExecutionTimeRealTime(t *testing.T) {
	en := newEnv(t, func(o *Options) { o.Limits.MaxExecutionTime = 200 * time.Millisecond; o.Clock = RealClock{} })
	wf := lines(op("w", `{"Wait":{"duration":150}}`), op("w2", `{"Wait":{"duration":150}}`), begin("w", "w2"))
	w, _ := Parse(wf)
	out, _ := en.e.Execute(context.Background(), "agent-1", "r", w, nil)
	if out.Error == nil || out.Error.Type != TimeoutError {
		t.Errorf("%+v", out.Error)
	}
}

func TestRetriesBackoffWithFakeClock(t *testing.T) {
	en := newEnv(t, nil)
	en.api.flaky.Store(3)
	out, rec := en.run(t, lines(op("f", `{"ApiCall":{"method":"GET","url":"https://api.example.com/flaky","outputPath":"/workflow/f"}}`), begin("f")))
	if out.Status != StatusSuccess {
		t.Fatalf("%+v", out.Error)
	}
	// Rand returns 1: jitter gives the top of [d/2, d]: 1 s, 2 s, 4 s
	if got := fmt.Sprint(en.clock.Sleeps()); got != "[1s 2s 4s]" {
		t.Errorf("sleeps %s", got)
	}
	if n := en.api.hit("GET /flaky"); n != 4 {
		t.Errorf("%d attempts", n)
	}
	var retries int
	for _, ev := range rec.events {
		if ev.Phase == PhaseRetry {
			retries++
			if ev.Error == nil || ev.Error.Details["statusCode"] != 503 {
				t.Errorf("retry event %+v", ev)
			}
		}
	}
	if retries != 3 {
		t.Errorf("%d retry events", retries)
	}

	// a fourth failure exhausts the 3 retries: retryable ExecutionError
	en2 := newEnv(t, nil)
	en2.api.flaky.Store(10)
	out, _ = en2.run(t, lines(op("f", `{"ApiCall":{"method":"GET","url":"https://api.example.com/flaky","outputPath":"/workflow/f"}}`), begin("f")))
	if out.Error == nil || !out.Error.Retryable || out.Error.Details["attempts"] != 4 || out.Error.Details["statusCode"] != 503 {
		t.Errorf("exhausted: %+v", out.Error)
	}
}

func TestBackoffJitterAndCap(t *testing.T) {
	p := DefaultRetryPolicy()
	for _, r := range []float64{0, 0.5, 0.999} {
		p.Rand = func() float64 { return r }
		for attempt, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
			d := p.Delay(attempt)
			if d < base/2 || d > base {
				t.Errorf("attempt %d rand %v: %v outside [%v, %v]", attempt, r, d, base/2, base)
			}
		}
	}
	p.Jitter = false
	if p.Delay(10) != time.Minute {
		t.Errorf("cap: %v", p.Delay(10))
	}
}

func TestRetryClassification(t *testing.T) {
	for _, tc := range []struct {
		path       string
		retryable  bool
		attempts   int32
		sleeps     string
		errType    string
		statusCode any
	}{
		{"/missing", false, 1, "[]", ExecutionError, 404},
		{"/timeout", true, 4, "[1s 2s 4s]", ExecutionError, 408},
		{"/limited", false, 2, "[7s]", "", nil},               // Retry-After 7 s beats the 1 s backoff
		{"/limited-long", true, 1, "[]", ExecutionError, 429}, // Retry-After past the 60 s cap: no retry
		{"/limited-huge", true, 1, "[]", ExecutionError, 429}, // seconds past a time.Duration: no retry either
	} {
		en := newEnv(t, nil)
		out, _ := en.run(t, lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com`+tc.path+`","outputPath":"/workflow/a"}}`), begin("a")))
		if n := en.api.hit("GET " + tc.path); n != tc.attempts {
			t.Errorf("%s: %d attempts, want %d", tc.path, n, tc.attempts)
		}
		if got := fmt.Sprint(en.clock.Sleeps()); got != tc.sleeps {
			t.Errorf("%s: sleeps %s, want %s", tc.path, got, tc.sleeps)
		}
		if tc.errType == "" {
			if out.Error != nil {
				t.Errorf("%s: %+v", tc.path, out.Error)
			}
			continue
		}
		if out.Error == nil || out.Error.Type != tc.errType || out.Error.Retryable != tc.retryable || out.Error.Details["statusCode"] != tc.statusCode {
			t.Errorf("%s: %+v", tc.path, out.Error)
		}
	}
	// connection refused is retried
	en := newEnv(t, nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	w, _ := Parse(lines(op("a", `{"ApiCall":{"method":"GET","url":"`+url+`/x","outputPath":"/workflow/a"}}`), begin("a")))
	out, _ := en.e.Execute(context.Background(), "agent-1", "r", w, nil)
	if out.Error == nil || !out.Error.Retryable || len(en.clock.Sleeps()) != 3 {
		t.Errorf("connection refused: %+v sleeps %v", out.Error, en.clock.Sleeps())
	}
}

func TestCacheHitsAndInvalidation(t *testing.T) {
	en := newEnv(t, nil)
	wf := lines(
		op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"points","operator":">","value":60}],"outputPath":"/workflow/f"}}`),
		begin("get", "f"))
	_, rec1 := en.run(t, wf)
	_, rec2 := en.run(t, wf)
	if n := en.api.hit("GET /users"); n != 1 {
		t.Errorf("%d GETs, want 1 (second run cached)", n)
	}
	for i, ev := range rec1.ends() {
		if ev.Cached {
			t.Errorf("first run event %d cached", i)
		}
	}
	for i, ev := range rec2.ends() {
		if !ev.Cached {
			t.Errorf("second run event %d not cached: %+v", i, ev)
		}
	}
	// after the TTL (5 min for ApiCall) the API is called again
	en.clock.Advance(5*time.Minute + time.Second)
	en.run(t, wf)
	if n := en.api.hit("GET /users"); n != 2 {
		t.Errorf("%d GETs after TTL, want 2", n)
	}
	// a POST to the same host invalidates the cached GET
	en.run(t, lines(op("post", `{"ApiCall":{"method":"POST","url":"https://api.example.com/users","body":{"name":"x"},"outputPath":"/workflow/p"}}`), begin("post")))
	en.run(t, wf)
	if n := en.api.hit("GET /users"); n != 3 {
		t.Errorf("%d GETs after a POST, want 3", n)
	}
	// another principal does not share the entry
	w, _ := en.e.Validate("agent-2", strings.ReplaceAll(wf, "https://api.example.com", en.api.URL))
	en.e.Execute(context.Background(), "agent-2", "r", w, nil)
	if n := en.api.hit("GET /users"); n != 4 {
		t.Errorf("%d GETs for another principal, want 4", n)
	}
}

func TestReferencesAndBody(t *testing.T) {
	en := newEnv(t, nil)
	out, _ := en.run(t, lines(
		op("d", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/d"}}`),
		op("u", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users/{/workflow/d.value}?q={/workflow/d.value}","outputPath":"/workflow/u"}}`),
		op("trav", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users/{/workflow/evil}","outputPath":"/workflow/t"}}`),
		op("set", `{"MergeData":{"sources":["/workflow/d"],"strategy":"deepMerge","outputPath":"/workflow/evil"}}`),
		op("p", `{"ApiCall":{"method":"POST","url":"https://api.example.com/echo-body","body":{"v":"{/workflow/d.value}","s":"n={/workflow/d.value}"},"outputPath":"/workflow/p"}}`),
		begin("d", "u", "p")))
	if out.Status != StatusSuccess {
		t.Fatalf("%+v", out.Error)
	}
	eqJSON(t, out.Results["u"], `{"id":"42","profile":"p-42","raw":"/users/42"}`)
	eqJSON(t, out.Results["p"], `{"got":{"v":42,"s":"n=42"},"ct":"application/json"}`)
	if escapeURLPart("/users/", "../admin") != "..%2Fadmin" || escapeURLPart("/users/", "..") != "%2E%2E" || escapeURLPart("/x?q=", "a&b=c") != "a%26b%3Dc" {
		t.Error("escaping")
	}
}

func TestResponseSizeCapAndText(t *testing.T) {
	en := newEnv(t, func(o *Options) { o.Limits.MaxResponseBytes = 1024 })
	out, _ := en.run(t, lines(op("b", `{"ApiCall":{"method":"GET","url":"https://api.example.com/big","outputPath":"/workflow/b"}}`), begin("b")))
	if out.Error == nil || out.Error.Type != DataError || out.Error.Retryable || en.api.hit("GET /big") != 1 {
		t.Errorf("size cap: %+v", out.Error)
	}
	out, _ = en.run(t, lines(op("t", `{"ApiCall":{"method":"GET","url":"https://api.example.com/text","outputPath":"/workflow/t"}}`), begin("t")))
	if out.Results["t"] != "plain text" {
		t.Errorf("text: %v", out.Results["t"])
	}
}

func TestLoopAndStepLimits(t *testing.T) {
	en := newEnv(t, func(o *Options) { o.Limits.MaxLoopIterations = 2 })
	out, _ := en.run(t, lines(
		op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("l", `{"Loop":{"inputPath":"/workflow/users","operations":["w"]}}`),
		op("w", `{"Wait":{"duration":0}}`),
		begin("get", "l")))
	if out.Error == nil || out.Error.OperationID != "l" || !strings.Contains(out.Error.Message, "at most 2") {
		t.Errorf("loop limit: %+v", out.Error)
	}
	en = newEnv(t, func(o *Options) { o.Limits.MaxSteps = 4 })
	out, _ = en.run(t, lines(
		op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("l", `{"Loop":{"inputPath":"/workflow/users","operations":["w"]}}`),
		op("w", `{"Wait":{"duration":0}}`),
		begin("get", "l")))
	if out.Error == nil || !strings.Contains(out.Error.Message, "more than 4") {
		t.Errorf("step limit: %+v", out.Error)
	}
}

func TestAPICallRateLimit(t *testing.T) {
	en := newEnv(t, func(o *Options) {
		o.Limiter = NewWindowLimiter(2, 100, o.Clock)
		o.Cache = NoCache{}
		o.Limits.MaxExecutionTime = 2 * time.Minute
	})
	a := op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/a"}}`)
	b := op("b", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/b"}}`)
	wf := lines(a, b, op("c", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/c"}}`),
		begin("a", "b", "c"))
	en.clock.Advance(50 * time.Second)
	out, _ := en.run(t, wf)
	// sliding window: the third call waits until the first is 60 s old
	// (fake clock), not 10 s for the next fixed minute, then passes
	if out.Status != StatusSuccess || fmt.Sprint(en.clock.Sleeps()) != "[1m0s]" {
		t.Errorf("%+v sleeps %v", out.Error, en.clock.Sleeps())
	}
	// a window, filled by an earlier execution, ending after
	// maxExecutionTime fails the call, retryable (a workflow whose own
	// calls pass the limit is refused: TestCallsPastCallLimitRefused)
	en2 := newEnv(t, func(o *Options) { o.Limiter = NewWindowLimiter(2, 100, o.Clock); o.Cache = NoCache{} })
	en2.run(t, lines(a, begin("a")))
	out, _ = en2.run(t, lines(a, b, begin("a", "b")))
	if out.Error == nil || !out.Error.Retryable || out.Error.OperationID != "b" || out.Error.Details["retry_after_s"] != int64(60) {
		t.Errorf("%+v", out.Error)
	}
}

// TestWaitsFillingBudgetRefused: Waits that add up to maxExecutionTime
// exactly were valid, then every execution failed at once ("waiting 30s
// would pass maxExecutionTime (30s left)"): the clock has moved when the
// Wait starts. Validation refuses them as it refuses longer ones; a
// millisecond less is valid and runs (on the executor's clock).
func TestWaitsFillingBudgetRefused(t *testing.T) {
	e := New(Options{Clock: newFakeClock(), Limits: Limits{MaxExecutionTime: 300 * time.Millisecond}})
	wf := func(ms int) string {
		return lines(op("w1", `{"Wait":{"duration":100}}`), op("w2", fmt.Sprintf(`{"Wait":{"duration":%d}}`, ms)), begin("w1", "w2"))
	}
	if _, res := e.Validate("agent-1", wf(200)); res.Valid || len(res.Errors) != 1 || res.Errors[0].Code != CodeLimit {
		t.Errorf("Waits of 300 ms under a 300 ms budget: %+v; want one %s error", res, CodeLimit)
	}
	w, res := e.Validate("agent-1", wf(199))
	if !res.Valid {
		t.Fatalf("Waits of 299 ms under a 300 ms budget: %+v", res.Errors)
	}
	if out, _ := e.Execute(context.Background(), "agent-1", "r", w, nil); out.Status != StatusSuccess {
		t.Errorf("Waits of 299 ms under a 300 ms budget: %s %+v", out.Status, out.Error)
	}
}

// TestHeaderReferenceControlCharacter: a header whose reference resolves
// to a value net/http will not send (a control character) is the
// operation's DataError naming the header, as one with a line break is;
// it was an ExecutionError of net/http ("invalid header field value").
func TestHeaderReferenceControlCharacter(t *testing.T) {
	en := newEnv(t, nil)
	for _, v := range []string{`a\u007fb`, `a\u0000b`} {
		out, _ := en.run(t, lines(op("a", apiOK),
			op("t", `{"TransformData":{"inputPath":"/workflow/users","transform":"map","config":{"set":{"h":"`+v+`"}},"outputPath":"/workflow/t"}}`),
			op("c", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","headers":{"X-H":"{/workflow/t[0].h}"},"outputPath":"/workflow/d"}}`),
			begin("a", "t", "c")))
		if e := out.Error; e == nil || e.Type != DataError || e.OperationID != "c" || !strings.Contains(e.Message, "header X-H") {
			t.Errorf("%s: %s %+v; want c's DataError naming header X-H", v, out.Status, e)
		}
	}
}

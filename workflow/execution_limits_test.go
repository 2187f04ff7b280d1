package workflow

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestContinueOnErrorTimeoutKeepsEarlierFailures: Options.ContinueOnError
// documents "the outcome is failed with the first failure as its error and
// every failure in error.details.failedOperations"; timeouts end the
// execution. When an earlier operation failed and a later one timed out,
// the final error was the timeout alone: the earlier failure was not
// listed in failedOperations (a limit kept them, a timeout did not).
func TestContinueOnErrorTimeoutKeepsEarlierFailures(t *testing.T) {
	en := newEnv(t, func(o *Options) {
		o.ContinueOnError = true
		o.Limits.MaxExecutionTime = 10 * time.Second
	})
	en.api.flaky.Store(100) // /flaky always 503: 3 retries, 1+2+4 s on the fake clock
	wf := lines(
		op("bad", `{"ApiCall":{"method":"GET","url":"https://api.example.com/flaky","outputPath":"/workflow/f"}}`),
		op("pause", `{"Wait":{"duration":5000}}`),
		begin("bad", "pause"))
	out, _ := en.run(t, wf)
	if out.Status != StatusFailed || out.Error == nil {
		t.Fatalf("outcome: %+v", out)
	}
	failed, _ := out.Error.Details["failedOperations"].([]map[string]any)
	var ids []string
	for _, f := range failed {
		ids = append(ids, f["operationId"].(string))
	}
	if !strings.Contains(","+strings.Join(ids, ",")+",", ",bad,") {
		t.Errorf("error %s on %q, failedOperations %v: the earlier failure of \"bad\" is not reported",
			out.Error.Type, out.Error.OperationID, ids)
	}
}

// TestCacheKeyHoldsCredentialPrefix: the ApiCall cache key holds the
// header's prefix with the credential id: two GETs sending different
// Authorization values ("Bearer <k>" and "Token <k>") shared one cache
// entry, the second never sent and answered with the first's response.
func TestCacheKeyHoldsCredentialPrefix(t *testing.T) {
	en := newEnv(t, nil)
	wf := lines(
		op("bearer", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo","headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "}},"outputPath":"/workflow/a"}}`),
		op("token", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo","headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"prefix":"Token "}},"outputPath":"/workflow/b"}}`),
		begin("bearer", "token"))
	out, rec := en.run(t, wf)
	if out.Status != StatusSuccess {
		t.Fatalf("%+v", out.Error)
	}
	ends := rec.ends()
	if n := en.api.hit("GET /echo"); n != 2 || ends[1].Cached {
		t.Errorf("GET /echo sent %d time(s), second cached=%v: a call with another Authorization value was answered from the cache", n, ends[1].Cached)
	}
	if last, _ := en.api.lastAuth.Load().(string); !strings.HasPrefix(last, "Token ") {
		t.Errorf("last Authorization the API saw: %q", strings.SplitN(last, " ", 2)[0])
	}
}

// TestLoopPastStepsRefusedBeforeFirstIteration: with the default
// limits a Loop may run over 1,000 elements (MaxLoopIterations, checked
// before the first iteration so nothing runs when it is over), but
// MaxSteps (1,000, counting the Loop and the operations before it) is only
// checked per operation: a Loop over 1,000 elements started, made 998
// POSTs and then failed with "ran more than 1000 operations". A Loop sure
// to pass MaxSteps is refused before its first iteration, like one past
// MaxLoopIterations.
func TestLoopPastStepsRefusedBeforeFirstIteration(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			posts.Add(1)
			_, _ = w.Write([]byte(`{"ok":true}`))
			return
		}
		items := make([]string, 1000)
		for i := range items {
			items[i] = fmt.Sprint(i)
		}
		_, _ = w.Write([]byte("[" + strings.Join(items, ",") + "]"))
	}))
	t.Cleanup(srv.Close)
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Cache: NoCache{}, Limiter: allowAll{}})
	wf := lines(
		op("list", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/items","outputPath":"/workflow/items"}}`),
		op("each", `{"Loop":{"inputPath":"/workflow/items","operations":["notify"]}}`),
		op("notify", `{"ApiCall":{"method":"POST","url":"`+srv.URL+`/notify","body":{"item":"{/workflow/_loop/item}"},"outputPath":"/workflow/n"}}`),
		begin("list", "each"))
	w, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatal(res.Errors)
	}
	out, err := e.Execute(tctx(t), "agent-1", "req-loop", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status == StatusSuccess || posts.Load() != 0 || out.Error == nil || out.Error.Type != ExecutionError {
		t.Errorf("the Loop (1000 elements, MaxSteps %d): %s after %d POSTs: %+v; want refused before its first", e.Limits().MaxSteps, out.Status, posts.Load(), out.Error)
	}
}

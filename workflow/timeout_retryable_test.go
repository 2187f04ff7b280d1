package workflow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// slowAPI answers GET /slow after advancing the executor's fake clock by
// took: an API that kept the execution that long.
func slowAPI(t *testing.T, clock *fakeClock, took time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		clock.Advance(took)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTimeoutRetryable: an execution that stops at maxExecutionTime
// because an API was slow ended with retryable false, though spec §10
// lists "Timeout errors" among the retryable errors, and truthfully so:
// the next run may find the API faster. A budget filled by the workflow's
// own Waits stays not retryable (TestWaitUsesClockAndBudget): every run
// fails the same way.
func TestTimeoutRetryable(t *testing.T) {
	for _, tc := range []struct {
		name, next string
	}{
		// the next operation finds no time left
		{"next operation", `{"TransformData":{"inputPath":"/workflow/s","transform":"select","config":{"fields":["ok"]},"outputPath":"/workflow/t"}}`},
		// a Wait that would fit in a budget the API had not taken
		{"wait", `{"Wait":{"duration":10000}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			took := 31 * time.Second
			if tc.name == "wait" {
				took = 25 * time.Second
			}
			srv := slowAPI(t, clock, took)
			e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Clock: clock, Cache: NoCache{}})
			w, res := e.Validate("agent-1", lines(
				op("slow", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/slow","outputPath":"/workflow/s"}}`),
				op("next", tc.next), begin("slow", "next")))
			if !res.Valid {
				t.Fatalf("invalid: %+v", res.Errors)
			}
			out, err := e.Execute(context.Background(), "agent-1", "r", w, nil)
			if err != nil || out.Error == nil || out.Error.Type != TimeoutError || out.Error.OperationID != "next" {
				t.Fatalf("%v %s %+v: want a TimeoutError on next", err, out.Status, out.Error)
			}
			if !out.Error.Retryable || out.Error.Code() != "timeout_error" {
				t.Errorf("%s (%s) retryable %v; want true (spec §10: timeout errors are retryable)", out.Error.Code(), out.Error.Message, out.Error.Retryable)
			}
		})
	}
}

// TestTimeoutRetryableAtDeadline: an API that does not answer before the
// execution's context ends (maxExecutionTime on the wall clock) gives a
// TimeoutError, retryable.
func TestTimeoutRetryableAtDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the client gives up at the deadline
	}))
	t.Cleanup(srv.Close)
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Clock: newFakeClock(), Cache: NoCache{},
		Limits: Limits{MaxExecutionTime: 200 * time.Millisecond}})
	w, res := e.Validate("agent-1", lines(
		op("hang", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/hang","outputPath":"/workflow/h"}}`), begin("hang")))
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "r", w, nil)
	if err != nil || out.Error == nil || out.Error.Type != TimeoutError || out.Error.OperationID != "hang" {
		t.Fatalf("%v %s %+v: want a TimeoutError on hang", err, out.Status, out.Error)
	}
	if !out.Error.Retryable {
		t.Errorf("%s retryable false; want true (spec §10: timeout errors are retryable)", out.Error.Message)
	}
}

// TestContinueOnErrorDeadlineKeepsEarlierFailures: with ContinueOnError,
// an execution whose context ran out (maxExecutionTime on the wall clock,
// an API that did not answer in time) ended with the timeout alone: the
// failure before it was dropped from failedOperations, which the same
// timeout on the executor's clock kept
// (TestContinueOnErrorTimeoutKeepsEarlierFailures).
func TestContinueOnErrorDeadlineKeepsEarlierFailures(t *testing.T) {
	api := newTestAPI(t)
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the client gives up at the deadline
	}))
	t.Cleanup(hang.Close)
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Clock: newFakeClock(), Cache: NoCache{}, ContinueOnError: true,
		Limits: Limits{MaxExecutionTime: 200 * time.Millisecond}})
	w, res := e.Validate("agent-1", lines(
		op("bad", `{"ApiCall":{"method":"GET","url":"`+api.URL+`/missing","outputPath":"/workflow/m"}}`),
		op("hang", `{"ApiCall":{"method":"GET","url":"`+hang.URL+`/hang","outputPath":"/workflow/h"}}`),
		begin("bad", "hang")))
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "r", w, nil)
	if err != nil || out.Error == nil || out.Error.Type != TimeoutError || out.Error.OperationID != "hang" {
		t.Fatalf("%v %s %+v: want the TimeoutError of hang", err, out.Status, out.Error)
	}
	failed, _ := out.Error.Details["failedOperations"].([]map[string]any)
	if len(failed) != 2 || failed[0]["operationId"] != "bad" || failed[1]["operationId"] != "hang" {
		t.Errorf("failedOperations %v; want bad, then hang", failed)
	}
}

// TestTimeoutAtBudgetNamesMaxExecutionTime: an ApiCall cut short by what
// maxExecutionTime left (an API took 29.8 s of the 30 s, the next one
// does not answer) ended "API call to … timed out after 30s", with the
// suggestion to raise the operation's timeout, which would not help: it
// is the execution's TimeoutError, retryable (an API's latency took the
// time), as when the next operation finds no time left.
func TestTimeoutAtBudgetNamesMaxExecutionTime(t *testing.T) {
	clock := newFakeClock()
	slow := slowAPI(t, clock, 29800*time.Millisecond)
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the client gives up
	}))
	t.Cleanup(hang.Close)
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Clock: clock, Cache: NoCache{}})
	w, res := e.Validate("agent-1", lines(
		op("slow", `{"ApiCall":{"method":"GET","url":"`+slow.URL+`/slow","outputPath":"/workflow/s"}}`),
		op("hang", `{"ApiCall":{"method":"GET","url":"`+hang.URL+`/hang","outputPath":"/workflow/h"}}`),
		begin("slow", "hang")))
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "r", w, nil)
	if err != nil || out.Error == nil || out.Error.Type != TimeoutError || out.Error.OperationID != "hang" {
		t.Fatalf("%v %s %+v: want a TimeoutError on hang", err, out.Status, out.Error)
	}
	if want := "the execution exceeded maxExecutionTime (30s)"; out.Error.Message != want || !out.Error.Retryable {
		t.Errorf("%q retryable %v, suggestions %q; want %q, retryable", out.Error.Message, out.Error.Retryable, out.Error.Suggestions, want)
	}
}

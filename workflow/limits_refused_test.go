package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestDeepWorkflowValueRefused: a workflow carrying a value nested deeper
// than the frames that would carry it allow (e2a.MaxNesting, less their
// own levels) is refused by validation, before it runs. Inside its JSONL
// string the body's depth check did not see it: it validated and ran, the
// executor echoed it into its function_call frame, which every reader
// refused, so execute answered 503 for an execution that ran (a client
// retries it) and GET /api/v1/executions/{id} answered 503 for ever. A
// value only as deep as the frames allow still runs and reads back.
func TestDeepWorkflowValueRefused(t *testing.T) {
	n := startNATS(t)
	exec := New(Options{})
	runPool(t, n.connect(t), exec)
	rest := &API{Executor: exec, Submitter: jsSubmitter{n.js}, Frames: &StreamFrames{Conn: n.nc},
		Authenticate: func(r *http.Request) (Principal, error) {
			return Principal{ID: r.Header.Get("X-Who"), Origin: e2a.IdentityAgent}, nil
		}}
	call := serveAPI(t, rest)
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	deep := workflowBody(lines(op("w", `{"Wait":{"duration":1,"note":`+nested(140)+`}}`), begin("w")))
	code, body := call("alice", "POST", "/api/v1/workflows/validate", deep)
	if code != 200 || body["valid"] != false || !strings.Contains(fmt.Sprint(body["errors"]), "nesting deeper than") {
		t.Fatalf("validate a value 140 deep: %d %v; want invalid, naming the nesting", code, body)
	}
	if code, body = call("alice", "POST", "/api/v1/workflows/execute", deep); code != http.StatusBadRequest {
		t.Fatalf("execute a value 140 deep: %d %v; want 400 before it runs", code, body)
	}
	// As deep as a line may be (the line's object, operation, Wait, note).
	fits := workflowBody(lines(op("w", `{"Wait":{"duration":1,"note":`+nested(maxValueDepth-4)+`}}`), begin("w")))
	code, body = call("alice", "POST", "/api/v1/workflows/execute", fits)
	if code != 200 || body["status"] != StatusSuccess {
		t.Fatalf("execute a value %d deep: %d %v", maxValueDepth-4, code, body)
	}
	id, _ := body["request_id"].(string)
	if code, body = call("alice", "GET", "/api/v1/executions/"+id, ""); code != 200 || body["status"] != StatusSuccess {
		t.Errorf("GET execution: %d %v", code, body)
	}
}

// TestContinueOnErrorStopsAtDataLimit: Options.ContinueOnError says
// "Timeouts, cancellation and limits still end the execution", and
// MaxDataBytes exists to stop a runaway execution. With ContinueOnError an
// execution past MaxDataBytes went on: the next ApiCall (a POST) was still
// sent, its answer refused only after it acted.
func TestContinueOnErrorStopsAtDataLimit(t *testing.T) {
	en := newEnv(t, func(o *Options) {
		o.ContinueOnError = true
		o.Limits.MaxDataBytes = 64
	})
	wf := lines(
		op("big", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("create", `{"ApiCall":{"method":"POST","url":"https://api.example.com/users","body":{"name":"x"},"outputPath":"/workflow/created"}}`),
		begin("big", "create"))
	out, _ := en.run(t, wf)
	if out.Status != StatusFailed || out.Error == nil || out.Error.OperationID != "big" {
		t.Fatalf("outcome: %+v %+v", out, out.Error)
	}
	if n := en.api.hit("POST /users"); n != 0 {
		t.Errorf("the execution went on past MaxDataBytes: POST /users sent %d time(s); failed: %v", n, out.Error.Details["failedOperations"])
	}
}

// TestLongOperationOrderValidates: a 1 MB workflow (under
// MaxWorkflowBytes) whose beginExecution lists ~130,000 distinct operation
// ids tied up /api/v1/workflows/validate for 15 s of CPU (walk checked each
// id against every earlier one: quadratic; now 0.25 s) and answered one
// error per id, an answer ~30 times the request: the report lists the
// first 100 and counts the rest.
func TestLongOperationOrderValidates(t *testing.T) {
	var ids strings.Builder
	n := 0
	for ids.Len() < MaxWorkflowBytes-4096 {
		if n > 0 {
			ids.WriteString(`","`)
		}
		fmt.Fprintf(&ids, "%x", n)
		n++
	}
	wf := lines(op("w", `{"Wait":{"duration":1}}`),
		`{"type":"beginExecution","executionId":"e1","operationOrder":["`+ids.String()+`"]}`)
	if len(wf) > MaxWorkflowBytes {
		t.Fatalf("workflow of %d bytes", len(wf))
	}
	a := &API{Executor: New(Options{})}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang, not a timing
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/v1/workflows/validate", strings.NewReader(wf))
	req.Header.Set("Content-Type", "application/jsonl")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("validate of a %d-byte workflow (%d ids) not answered after %v: %v", len(wf), n, time.Since(t0).Round(time.Millisecond), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("validate: %d %.200s", resp.StatusCode, b)
	}
	if len(b) > 2*len(wf) {
		t.Errorf("validate answered %d bytes for a %d-byte workflow (status %d)", len(b), len(wf), resp.StatusCode)
	}
	var res ValidationResult
	if err := json.Unmarshal(b, &res); err != nil || res.Valid || len(res.Errors) != maxIssues+1 ||
		!strings.Contains(res.Errors[maxIssues].Message, "more errors not listed") {
		t.Errorf("validate: %d errors listed (want the first %d and a count of the rest), valid %v, %v", len(res.Errors), maxIssues, res.Valid, err)
	}
}

// flakyFrames fails its first read (a NATS hiccup), then knows nothing yet.
type flakyFrames struct{ calls int }

func (f *flakyFrames) Frames(context.Context, string) ([]*e2a.Response, error) {
	f.calls++
	if f.calls == 1 {
		return nil, fmt.Errorf("nats: timeout")
	}
	return nil, nil
}

type recordingSubmitter struct{ envs []*e2a.Envelope }

func (s *recordingSubmitter) Submit(_ context.Context, env *e2a.Envelope) error {
	s.envs = append(s.envs, env)
	return nil
}

// TestExecuteReadErrorAfterQueueingIsNot503: once Submit has queued the
// execution durably (it will run), one failed read of its frames during
// execute's wait answered 503 "could not be read", with neither the
// execution's id nor Location: the client could not find the execution
// and, told the service was unavailable, submitted the workflow again (a
// second run of its ApiCalls). The answer for an accepted execution whose
// result is not known is 202 with its id (README: "do not submit it
// again").
func TestExecuteReadErrorAfterQueueingIsNot503(t *testing.T) {
	sub := &recordingSubmitter{}
	a := &API{Executor: New(Options{}), Submitter: sub, Frames: &flakyFrames{}, Wait: 200 * time.Millisecond, PollInterval: time.Millisecond}
	call := serveAPI(t, a)
	code, body := call("", "POST", "/api/v1/workflows/execute", workflowBody(lines(op("w", `{"Wait":{"duration":1}}`), begin("w"))))
	if len(sub.envs) != 1 {
		t.Fatalf("submitted %d times", len(sub.envs))
	}
	if code != http.StatusAccepted || body["request_id"] != sub.envs[0].RequestID {
		t.Errorf("execute of a queued execution: %d %v (want 202 with request_id %s)", code, body, sub.envs[0].RequestID)
	}
}

// TestStepsPastMaxStepsRefused: an execution runs at most MaxSteps
// operations, and operationOrder lists each run of a top-level operation
// (an id listed 100,000 times is 100,000 runs). Such a workflow validated
// (the walk checks a repeated id once) and every execution failed at its
// MaxSteps+1st operation, after the first MaxSteps had acted (here: one
// POST per listing). Validation counts the runs an execution makes at
// least (each Conditional its shorter branch, each Loop none) and refuses
// more than MaxSteps, before anything runs; as many as MaxSteps still run.
func TestStepsPastMaxStepsRefused(t *testing.T) {
	en := newEnv(t, func(o *Options) { o.Limits.MaxSteps = 6 })
	post := op("post", `{"ApiCall":{"method":"POST","url":"https://api.example.com/users","body":{},"outputPath":"/workflow/p"}}`)
	wait := op("w", `{"Wait":{"duration":0}}`)
	cond := op("c", `{"Conditional":{"condition":{"path":"/workflow/p","operator":"==","value":1},"ifTrue":["w","w","w"],"ifFalse":["w","w"]}}`)
	loop := op("l", `{"Loop":{"inputPath":"/workflow/p.list","operations":["w","w","w"]}}`)
	for _, tc := range []struct {
		name string
		wf   string
		runs int // at least; 0: valid
	}{
		{"order", lines(post, begin("post", "post", "post", "post", "post", "post", "post")), 7},
		{"conditional's shorter branch", lines(post, wait, cond, begin("post", "c", "c")), 7},      // 1 + 2×(1+2)
		{"conditional within the limit", lines(post, wait, cond, begin("post", "c", "w", "w")), 0}, // 1 + 3 + 2
		{"loop may run none", lines(post, wait, loop, begin("post", "l", "l", "l", "l", "l")), 0},
	} {
		wf := strings.ReplaceAll(tc.wf, "https://api.example.com", en.api.URL)
		_, res := en.e.Validate("agent-1", wf)
		if tc.runs == 0 {
			if !res.Valid {
				t.Errorf("%s: %+v; want valid", tc.name, res.Errors)
			}
			continue
		}
		want := fmt.Sprintf("at least %d operations", tc.runs)
		if res.Valid || len(res.Errors) != 1 || res.Errors[0].Code != CodeLimit || res.Errors[0].Field != "operationOrder" ||
			!strings.Contains(res.Errors[0].Message, want) {
			t.Errorf("%s: %+v; want one %s error on operationOrder saying %q", tc.name, res, CodeLimit, want)
		}
	}
	if n := en.api.hit("POST /users"); n != 0 {
		t.Errorf("%d POSTs sent by validation", n)
	}
}

// TestCallsPastCallLimitRefused: the API-call limiter ([WindowLimiter],
// per principal, sliding windows) refuses the PerMinute+1st call within a
// minute. A workflow making more calls than that in an execution whose
// maxExecutionTime fits in a minute (or more than PerHour in any) cannot
// succeed: it validated, each execution made PerMinute calls (POSTs
// included) and failed at the next, "API call rate limit exceeded",
// retryable. Validation counts the ApiCalls an execution makes at least
// and refuses it before any call; a budget over a minute lets the calls
// spread, and is valid.
func TestCallsPastCallLimitRefused(t *testing.T) {
	post := op("post", `{"ApiCall":{"method":"POST","url":"https://api.example.com/users","body":{},"outputPath":"/workflow/p"}}`)
	wait := op("w", `{"Wait":{"duration":0}}`)
	cond := op("c", `{"Conditional":{"condition":{"path":"/workflow/p","operator":"==","value":1},"ifTrue":["post","post"],"ifFalse":["w"]}}`)
	for _, tc := range []struct {
		name               string
		perMinute, perHour int
		budget             time.Duration
		order              []string
		want               string // "": valid
	}{
		{"per minute", 3, 0, 0, []string{"post", "post", "post", "post"}, "at least 4 API calls"},
		{"at the limit", 3, 0, 0, []string{"post", "post", "post"}, ""},
		{"a branch may call none", 3, 0, 0, []string{"post", "post", "post", "c", "c"}, ""},
		{"a budget over a minute", 3, 0, 2 * time.Minute, []string{"post", "post", "post", "post"}, ""},
		{"per hour", 100, 3, 2 * time.Minute, []string{"post", "post", "post", "post"}, "at least 4 API calls"},
		{"a budget over an hour", 100, 3, 2 * time.Hour, []string{"post", "post", "post", "post"}, ""},
	} {
		en := newEnv(t, func(o *Options) {
			o.Limits.MaxExecutionTime = tc.budget
			o.Limiter = NewWindowLimiter(tc.perMinute, tc.perHour, o.Clock)
		})
		wf := strings.ReplaceAll(lines(post, wait, cond, begin(tc.order...)), "https://api.example.com", en.api.URL)
		_, res := en.e.Validate("agent-1", wf)
		if tc.want == "" {
			if !res.Valid {
				t.Errorf("%s: %+v; want valid", tc.name, res.Errors)
			}
			continue
		}
		if res.Valid || len(res.Errors) != 1 || res.Errors[0].Code != CodeLimit || res.Errors[0].Field != "operationOrder" ||
			!strings.Contains(res.Errors[0].Message, tc.want) {
			t.Errorf("%s: %+v; want one %s error on operationOrder saying %q", tc.name, res, CodeLimit, tc.want)
		}
	}
	// An executor that validates for the pool (serve) does not know the
	// caller's maxExecutionTime (the pool's policy file may give it more
	// than a minute): it leaves the check to the pool.
	e := New(Options{ValidateOnly: true, Limiter: NewWindowLimiter(3, 0, nil)})
	wf := lines(post, begin("post", "post", "post", "post"))
	if _, res := e.Validate("agent-1", wf); !res.Valid {
		t.Errorf("validate-only: %+v; want valid, left to the pool", res.Errors)
	}
}

// TestCapabilitiesNameTheLimits: an agent learns the limits a workflow is
// held to from /api/v1/capabilities' securityConstraints. It named
// maxExecutionTime, maxOperations, maxResponseBytes and maxLoopIterations,
// not the operations run (MaxSteps), the nesting, the bytes of a
// StoreData value and of the outputs, or the API calls per minute and hour,
// which refuse a workflow at validation too
// (TestStepsPastMaxStepsRefused, TestCallsPastCallLimitRefused). The call
// limits are named only when the executor knows them (a WindowLimiter).
func TestCapabilitiesNameTheLimits(t *testing.T) {
	e := New(Options{Limits: Limits{MaxSteps: 7, MaxNesting: 3, MaxStoreBytes: 1000, MaxDataBytes: 5000},
		Limiter: NewWindowLimiter(4, 40, nil)})
	got := e.Capabilities("agent-1").SecurityConstraints
	for k, want := range map[string]any{"maxSteps": 7, "maxNesting": 3, "maxStoreBytes": 1000, "maxDataBytes": 5000,
		"apiCallsPerMinute": 4, "apiCallsPerHour": 40} {
		if got[k] != want {
			t.Errorf("securityConstraints[%q] = %v, want %v", k, got[k], want)
		}
	}
	got = New(Options{Limiter: allowAll{}}).Capabilities("agent-1").SecurityConstraints
	if _, ok := got["apiCallsPerMinute"]; ok || got["maxSteps"] != DefaultLimits().MaxSteps {
		t.Errorf("another limiter: %v; want no call limits named, maxSteps %d", got, DefaultLimits().MaxSteps)
	}
}

// TestBranchWaitsFillingBudgetRefused: validation refuses Waits that add
// up to maxExecutionTime (TestWaitsFillingBudgetRefused), but counted only
// those listed in operationOrder: a Conditional waiting in both branches
// was valid, and every execution ended with a TimeoutError (not
// retryable). The Waits an execution is sure to run are counted: a
// Conditional's shorter branch, none of a Loop's.
func TestBranchWaitsFillingBudgetRefused(t *testing.T) {
	en := newEnv(t, func(o *Options) { o.Limits.MaxExecutionTime = 300 * time.Millisecond })
	get := op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`)
	w, w2 := op("w", `{"Wait":{"duration":100}}`), op("w2", `{"Wait":{"duration":250}}`)
	cond := func(ifFalse string) string {
		return op("c", `{"Conditional":{"condition":{"path":"/workflow/users","operator":"==","value":1},"ifTrue":["w2"],"ifFalse":`+ifFalse+`}}`)
	}
	loop := op("l", `{"Loop":{"inputPath":"/workflow/users","operations":["w2"]}}`)
	for _, tc := range []struct {
		name  string
		wf    string
		valid bool
	}{
		{"both branches wait", lines(get, w, w2, cond(`["w","w","w"]`), begin("get", "w", "c")), false}, // 100 + min(250, 300)
		{"one branch waits less", lines(get, w, w2, cond(`["w"]`), begin("get", "w", "c")), true},       // 100 + min(250, 100)
		{"a loop may wait none", lines(get, w, w2, loop, begin("get", "w", "l")), true},
	} {
		wf := strings.ReplaceAll(tc.wf, "https://api.example.com", en.api.URL)
		_, res := en.e.Validate("agent-1", wf)
		if tc.valid != res.Valid || !tc.valid && (len(res.Errors) != 1 || res.Errors[0].Code != CodeLimit || res.Errors[0].Field != "operationOrder") {
			t.Errorf("%s: %+v; want valid %v (else one %s error on operationOrder)", tc.name, res, tc.valid, CodeLimit)
		}
	}
}

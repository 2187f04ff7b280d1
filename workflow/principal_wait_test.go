package workflow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// stuckStorage is a store that does not answer before the execution's
// context ends (a KV bucket out of reach).
type stuckStorage struct{}

func (stuckStorage) Kinds() []string { return []string{StorageLocal} }

func (stuckStorage) Store(ctx context.Context, _ StoreScope, _, _ string, _ []byte) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// TestExecuteWaitsPrincipalLimit: execute waited the global
// maxExecutionTime (30 s) + 5 s for every caller, though the policy gives
// principals their own limit. A principal with a 2 s limit whose
// execution the pool had not started yet was answered at 35 s instead of
// 2 s + 5 s; one with a 60 s limit was answered 202 at 35 s though its
// execution ended at 40 s. Run promptly, the short limit's execution is
// answered at 2 s, a TimeoutError, retryable (spec §10).
func TestExecuteWaitsPrincipalLimit(t *testing.T) {
	pol := examplePolicy(t, "127.0.0.1")
	pol.Principals = map[string]PrincipalPolicy{"quick": {MaxExecutionTimeMs: 2000}, "patient": {MaxExecutionTimeMs: 60000}}
	store := op("keep", `{"StoreData":{"inputPath":"/workflow","storage":"localStorage","key":"k"}}`)
	for _, tc := range []struct {
		name, who, wf string
		poolDelay     time.Duration // until the pool starts the execution
		code          int
		at            time.Duration // when execute answers
		status, error string
	}{
		{"short limit, run", "quick", lines(op("w", `{"Wait":{"duration":0}}`), store, begin("w", "keep")), time.Millisecond,
			http.StatusOK, 2*time.Second + time.Millisecond, StatusFailed, TimeoutError},
		{"short limit, pool busy", "quick", lines(op("w", `{"Wait":{"duration":0}}`), store, begin("w", "keep")), time.Hour,
			http.StatusAccepted, 7 * time.Second, StatusRunning, ""},
		{"long limit", "patient", lines(op("w", `{"Wait":{"duration":40000}}`), begin("w")), time.Millisecond,
			http.StatusOK, 40*time.Second + time.Millisecond, StatusSuccess, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := New(Options{Policy: pol, Storage: stuckStorage{}, Cache: NoCache{}})
				frames := &memFrames{writers: map[string]*agenttest.Writer{}, tasks: map[string][]string{}}
				a := &API{Executor: e, Submitter: &memSubmitter{m: frames, h: e, delay: tc.poolDelay}, Frames: frames,
					Authenticate: func(r *http.Request) (Principal, error) { return Principal{ID: r.Header.Get("X-Who")}, nil }}
				mux := http.NewServeMux()
				a.Register(mux)
				req := httptest.NewRequest("POST", "/api/v1/workflows/execute", strings.NewReader(workflowBody(tc.wf)))
				req.Header.Set("X-Who", tc.who)
				rec := httptest.NewRecorder()
				start := time.Now()
				mux.ServeHTTP(rec, req)
				took := time.Since(start)
				var body map[string]any
				_ = jsonDecode(rec.Body, &body)
				// execute polls memFrames at most 500 ms apart
				if rec.Code != tc.code || took < tc.at || took > tc.at+500*time.Millisecond || body["status"] != tc.status {
					t.Errorf("answered %d %v after %v; want %d %s after %v (+ a poll)", rec.Code, body, took, tc.code, tc.status, tc.at)
				}
				if tc.error != "" {
					we, _ := body["error"].(map[string]any)
					if we["type"] != tc.error || we["retryable"] != true {
						t.Errorf("error %v; want a %s, retryable (spec §10)", we, tc.error)
					}
				}
				// the execution answered 202 still runs once the pool starts it
				id, _ := body["request_id"].(string)
				if final, err := a.waitFinal(context.Background(), id); err != nil || final == nil {
					t.Errorf("no final frame for %q: %v", id, err)
				}
			})
		})
	}
}

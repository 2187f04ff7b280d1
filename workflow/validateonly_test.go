package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestValidateOnlyLeavesPermissionsToTheRunner: the REST API of a server
// that validates with a ValidateOnly executor (no policy, no vault, the
// runner's storage kinds: `e2a serve`) while another executor runs the
// executions (the workflow pool, with the policy and the vault). It
// accepts what only the runner can judge, says on /validate which checks
// it left; the runner's refusal of a workflow before running it reaches
// the client as the server's own refusal would: 403, the spec's error
// body, not retryable; and a storage type the runner lacks is refused
// up front.
func TestValidateOnlyLeavesPermissionsToTheRunner(t *testing.T) {
	runner := newEnv(t, nil)
	front := New(Options{ValidateOnly: true, Storage: StorageKinds{StorageLocal, StorageSession}})
	frames := &memFrames{writers: map[string]*agenttest.Writer{}, tasks: map[string][]string{}}
	sub := &memSubmitter{m: frames, h: runner.e}
	a := &API{Executor: front, Submitter: sub, Frames: frames, Tasks: frames,
		Authenticate: func(*http.Request) (Principal, error) { return Principal{ID: "agent-1"}, nil }}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	call := func(path, wf string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(workflowBody(wf)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	lastFrame := func() e2a.ErrorBody {
		t.Helper()
		env := sub.envs[len(sub.envs)-1]
		fr, _ := frames.Frames(t.Context(), env.RequestID)
		var b e2a.ErrorBody
		if len(fr) == 0 || json.Unmarshal(fr[len(fr)-1].Body, &b) != nil {
			t.Fatalf("no final frame for %s", env.RequestID)
		}
		return b
	}

	// example1 calls api.example.com, which the runner's policy does not
	// know: the front cannot tell, and says so.
	resp, body := call("/api/v1/workflows/validate", example1)
	deferred, _ := body["deferred"].([]any)
	if resp.StatusCode != 200 || body["valid"] != true || len(deferred) != len(DeferredChecks()) {
		t.Errorf("validate on the front: %d %v", resp.StatusCode, body)
	}
	if _, res := runner.e.Validate("agent-1", example1); res.Valid || res.Deferred != nil {
		t.Errorf("the runner checks everything and defers nothing: %+v", res)
	}
	// The runner refuses it: the client gets the refusal as the front's own.
	resp, body = call("/api/v1/workflows/execute", example1)
	if e, _ := body["error"].(map[string]any); resp.StatusCode != http.StatusForbidden || e["type"] != PermissionError || e["operationId"] != "fetch-data" ||
		!strings.Contains(e["message"].(string), "api.example.com") || resp.Header.Get("Retry-After") != "" {
		t.Errorf("execute refused by the runner: %d %v", resp.StatusCode, body)
	}
	if b := lastFrame(); b.Code != "permission_error" || b.Retryable {
		t.Errorf("the runner's frame: %+v", b)
	}
	// A credential the runner's vault does not hold for the principal.
	cred := `{"type":"operationUpdate","operationId":"get","operation":{"ApiCall":{"method":"GET","url":"` + runner.api.URL + `/users","headers":{"Authorization":{"credentialRef":{"id":"other-agent-key"}}},"outputPath":"/workflow/u"}}}
{"type":"beginExecution","executionId":"c-1","operationOrder":["get"]}`
	resp, body = call("/api/v1/workflows/execute", cred)
	if e, _ := body["error"].(map[string]any); resp.StatusCode != http.StatusForbidden || e["type"] != PermissionError {
		t.Errorf("a credential the runner does not hold: %d %v", resp.StatusCode, body)
	}
	// What the runner allows runs.
	resp, body = call("/api/v1/workflows/execute", strings.ReplaceAll(example2, "https://api.example.com", runner.api.URL))
	if resp.StatusCode != 200 || body["status"] != StatusSuccess {
		t.Errorf("an allowed workflow: %d %v", resp.StatusCode, body)
	}
	// An invalid workflow is still refused by the front (400), and a
	// failure while running is no refusal: 200 with status failed.
	if resp, body = call("/api/v1/workflows/execute", `{"type":"beginExecution","executionId":"x","operationOrder":["nope"]}`); resp.StatusCode != 400 {
		t.Errorf("invalid: %d %v", resp.StatusCode, body)
	}
	failing := `{"type":"operationUpdate","operationId":"get","operation":{"ApiCall":{"method":"GET","url":"` + runner.api.URL + `/status/404","outputPath":"/workflow/u"}}}
{"type":"beginExecution","executionId":"f-1","operationOrder":["get"]}`
	if resp, body = call("/api/v1/workflows/execute", failing); resp.StatusCode != 200 || body["status"] != StatusFailed {
		t.Errorf("a failed execution: %d %v", resp.StatusCode, body)
	}
	// Storage: the runner's kinds, checked by the front.
	store := func(kind string) string {
		return `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":1}}}
{"type":"operationUpdate","operationId":"s","operation":{"StoreData":{"inputPath":"/workflow","storage":"` + kind + `","key":"k"}}}
{"type":"beginExecution","executionId":"s-1","operationOrder":["w","s"]}`
	}
	for kind, want := range map[string]bool{StorageLocal: true, StorageSession: true, StorageFile: false} {
		_, res := front.Validate("agent-1", store(kind))
		if refused := slices.ContainsFunc(res.Errors, func(is Issue) bool { return is.Field == "operation.StoreData.storage" }); refused == want {
			t.Errorf("StoreData %s on the front: %+v", kind, res)
		}
	}
	if _, err := (StorageKinds{StorageLocal}).Store(t.Context(), StoreScope{}, StorageLocal, "k", nil); !errors.Is(err, ErrValidateOnly) {
		t.Errorf("StorageKinds stores nothing: %v", err)
	}
}

// TestValidateOnlyLeavesPrincipalLimitsToTheRunner: the runner's policy
// may give a principal more operations or a longer maxExecutionTime than
// the global limits (PrincipalPolicy). The front (`e2a serve`, no policy)
// judged every principal by the global ones: a workflow the runner would
// run for agent-1 (21 operations, 42 s of Waits, allowed 30 and 120 s)
// was refused by the front's /validate and /execute. The front leaves
// those limits to the runner and says so (principal_limits in deferred);
// the runner holds each principal to its own.
func TestValidateOnlyLeavesPrincipalLimitsToTheRunner(t *testing.T) {
	runner := newEnv(t, func(o *Options) {
		o.Policy.Principals = map[string]PrincipalPolicy{"agent-1": {MaxOperations: 30, MaxExecutionTimeMs: 120000}}
	})
	front := New(Options{ValidateOnly: true})
	var ops, ids []string
	for i := range 21 {
		ids = append(ids, fmt.Sprintf("w%d", i))
		ops = append(ops, op(ids[i], `{"Wait":{"duration":2000}}`))
	}
	wf := lines(append(ops, begin(ids...))...)
	if _, res := front.Validate("agent-1", wf); !res.Valid || !slices.Contains(res.Deferred, "principal_limits") {
		t.Errorf("the front: %+v; want valid, principal_limits deferred", res)
	}
	if _, res := runner.e.Validate("agent-1", wf); !res.Valid {
		t.Errorf("the runner, for agent-1: %+v; want valid", res.Errors)
	}
	if _, res := runner.e.Validate("agent-2", wf); res.Valid || len(res.Errors) != 2 || res.Errors[0].Code != CodeLimit || res.Errors[1].Code != CodeLimit {
		t.Errorf("the runner, for agent-2: %+v; want the operations and the Waits refused", res.Errors)
	}
}

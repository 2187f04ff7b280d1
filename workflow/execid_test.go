package workflow

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// ownedIndex is the ingress's task index in small: an executionId belongs
// to the first principal that used it; later executions of that principal
// are appended, other principals' are not indexed.
type ownedIndex struct {
	mu    sync.Mutex
	owner map[string]string
	ids   map[string][]string
}

func (x *ownedIndex) RequestIDs(_ context.Context, task string) ([]string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.ids[task]), nil
}

type indexingSubmitter struct {
	Submitter
	x *ownedIndex
}

func (s indexingSubmitter) Submit(ctx context.Context, env *e2a.Envelope) error {
	if err := s.Submitter.Submit(ctx, env); err != nil {
		return err
	}
	s.x.mu.Lock()
	defer s.x.mu.Unlock()
	if o, ok := s.x.owner[env.TaskID]; !ok || o == env.UserID {
		s.x.owner[env.TaskID] = env.UserID
		s.x.ids[env.TaskID] = append(s.x.ids[env.TaskID], env.RequestID)
	}
	return nil
}

// TestExecuteAnswersExecutionID: execute answers the workflow's executionId
// as execution_id (the specification's example), with the request id as
// request_id; both resolve on GET /api/v1/executions/{id}. An executionId
// another principal used first is not answered (it would not resolve for
// the caller): execution_id is then the request id, and the other's
// execution stays unreadable (issue 16).
func TestExecuteAnswersExecutionID(t *testing.T) {
	n := startNATS(t)
	exec := New(Options{})
	runPool(t, n.connect(t), exec)
	x := &ownedIndex{owner: map[string]string{}, ids: map[string][]string{}}
	rest := &API{Executor: exec, Submitter: indexingSubmitter{jsSubmitter{n.js}, x}, Frames: &StreamFrames{Conn: n.nc}, Tasks: x,
		Authenticate: func(r *http.Request) (Principal, error) {
			return Principal{ID: r.Header.Get("X-Who"), Origin: e2a.IdentityAgent}, nil
		}}
	call := serveAPI(t, rest)
	wf := workflowBody(lines(op("w", `{"Wait":{"duration":1}}`), `{"type":"beginExecution","executionId":"exec-123","operationOrder":["w"]}`))

	code, body := call("alice", "POST", "/api/v1/workflows/execute", wf)
	reqID, _ := body["request_id"].(string)
	if code != 200 || body["execution_id"] != "exec-123" || body["status"] != StatusSuccess || reqID == "" || reqID == "exec-123" {
		t.Fatalf("execute: %d %v", code, body)
	}
	for _, id := range []string{"exec-123", reqID} {
		code, body = call("alice", "GET", "/api/v1/executions/"+id, "")
		if code != 200 || body["execution_id"] != id || body["request_id"] != reqID || body["status"] != StatusSuccess {
			t.Errorf("GET %s: %d %v", id, code, body)
		}
	}

	// bob reuses exec-123: his execution runs and answers its request id.
	code, body = call("bob", "POST", "/api/v1/workflows/execute", wf)
	bobReq, _ := body["request_id"].(string)
	if code != 200 || body["execution_id"] != bobReq || bobReq == reqID {
		t.Fatalf("bob execute: %d %v", code, body)
	}
	if code, body = call("bob", "GET", "/api/v1/executions/"+bobReq, ""); code != 200 || body["request_id"] != bobReq {
		t.Errorf("bob GET own: %d %v", code, body)
	}
	for _, id := range []string{"exec-123", reqID} {
		if code, body = call("bob", "GET", "/api/v1/executions/"+id, ""); code != 404 {
			t.Errorf("bob reads alice's %s: %d %v", id, code, body)
		}
	}
	if code, body = call("alice", "GET", "/api/v1/executions/exec-123", ""); code != 200 || body["request_id"] != reqID {
		t.Errorf("alice after bob: %d %v", code, body)
	}
}

// serveAPI serves api's routes on a test server and returns a call of
// them: the answer's status and JSON body, X-Who naming the caller (none
// when who is "").
func serveAPI(t *testing.T, api *API) func(who, method, path, body string) (int, map[string]any) {
	t.Helper()
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return func(who, method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if who != "" {
			req.Header.Set("X-Who", who)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
}

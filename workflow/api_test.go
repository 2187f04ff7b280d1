package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// memFrames is an in-memory frame store: each request's frames as its
// writer took them; memSubmitter runs the executor synchronously as the
// agent runtime would, writing frames into it.
type memFrames struct {
	mu      sync.Mutex
	writers map[string]*agenttest.Writer
	tasks   map[string][]string
}

func (m *memFrames) Frames(_ context.Context, id string) ([]*e2a.Response, error) {
	m.mu.Lock()
	w := m.writers[id]
	m.mu.Unlock()
	if w == nil {
		return nil, nil
	}
	return w.Frames(), nil
}

func (m *memFrames) RequestIDs(_ context.Context, task string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tasks[task], nil
}

type memSubmitter struct {
	m     *memFrames
	h     agent.Handler
	delay time.Duration
	envs  []*e2a.Envelope
}

func (s *memSubmitter) Submit(ctx context.Context, env *e2a.Envelope) error {
	s.envs = append(s.envs, env)
	w := &agenttest.Writer{Env: env}
	s.m.mu.Lock()
	s.m.tasks[env.TaskID] = append(s.m.tasks[env.TaskID], env.RequestID)
	s.m.writers[env.RequestID] = w
	s.m.mu.Unlock()
	run := func() {
		err := s.h.Serve(context.Background(), env, w)
		var ae *agent.Error
		if errors.As(err, &ae) {
			_ = w.Write(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: ae.Code, Message: ae.Message, Retryable: ae.Retryable, Details: ae.Details}, true)
		}
	}
	if s.delay > 0 {
		go func() { time.Sleep(s.delay); run() }() // the behaviour: a pool that answers late
		return nil
	}
	run()
	return nil
}

func TestRESTAPIWithFakes(t *testing.T) {
	en := newEnv(t, nil)
	frames := &memFrames{writers: map[string]*agenttest.Writer{}, tasks: map[string][]string{}}
	sub := &memSubmitter{m: frames, h: en.e}
	a := &API{Executor: en.e, Submitter: sub, Frames: frames, Tasks: frames,
		Authenticate: func(r *http.Request) (Principal, error) {
			k := r.Header.Get("X-Api-Key")
			if k == "" {
				return Principal{}, ErrUnauthenticated
			}
			return Principal{ID: k}, nil
		},
		RateLimits: rateLimitsFunc(func(_ context.Context, p string) (*RateLimitStatus, error) {
			return &RateLimitStatus{Limits: map[string]int64{"requests_per_minute": 60}, Usage: map[string]int64{"requests_last_minute": 15}, Remaining: map[string]int64{"requests_per_minute": 45}}, nil
		}),
	}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	call := func(method, path, key, ct, body string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = jsonDecode(resp.Body, &m)
		return resp, m
	}

	if resp, _ := call("GET", "/api/v1/capabilities", "", "", ""); resp.StatusCode != 401 {
		t.Errorf("unauthenticated: %d", resp.StatusCode)
	}
	if resp, _ := call("GET", "/health", "", "", ""); resp.StatusCode != 200 {
		t.Errorf("health needs no auth: %d", resp.StatusCode)
	}
	resp, body := call("GET", "/api/v1/rate-limit/status", "agent-1", "", "")
	if resp.StatusCode != 200 || body["agent_id"] != "agent-1" || body["remaining"].(map[string]any)["requests_per_minute"] != float64(45) {
		t.Errorf("rate limit: %d %v", resp.StatusCode, body)
	}

	wf := strings.ReplaceAll(example2, "https://api.example.com", en.api.URL)
	// raw JSONL body
	resp, body = call("POST", "/api/v1/workflows/validate", "agent-1", "application/jsonl", wf)
	if resp.StatusCode != 200 || body["valid"] != true {
		t.Errorf("validate jsonl: %d %v", resp.StatusCode, body)
	}
	resp, body = call("POST", "/api/v1/workflows/execute", "agent-1", "", workflowBody(wf))
	if resp.StatusCode != 200 || body["status"] != StatusSuccess {
		t.Fatalf("execute: %d %v", resp.StatusCode, body)
	}
	id := body["execution_id"].(string)
	if sub.envs[0].UserID != "agent-1" || sub.envs[0].TaskID != "exec-2" || sub.envs[0].Method != Method {
		t.Errorf("envelope: %+v", sub.envs[0])
	}
	// by request id, and by the workflow's executionId
	for _, key := range []string{id, "exec-2"} {
		resp, body = call("GET", "/api/v1/executions/"+key, "agent-1", "", "")
		if resp.StatusCode != 200 || body["execution_id"] != id || body["status"] != StatusSuccess {
			t.Errorf("execution %s: %d %v", key, resp.StatusCode, body)
		}
	}
	// another principal sees nothing
	if resp, _ = call("GET", "/api/v1/executions/"+id, "agent-2", "", ""); resp.StatusCode != 404 {
		t.Errorf("other principal: %d", resp.StatusCode)
	}
	// an unknown id is quoted in the 404 cut short (it came back whole:
	// 5 KB for a 5,000-character id)
	resp, body = call("GET", "/api/v1/executions/"+strings.Repeat("x", 5000), "agent-1", "", "")
	if e, _ := body["error"].(map[string]any); resp.StatusCode != 404 || e == nil || len(e["message"].(string)) > 200 {
		t.Errorf("an unknown 5,000-character id: %d %v", resp.StatusCode, body)
	}
	// permission errors answer 403 with the spec's format
	resp, body = call("POST", "/api/v1/workflows/execute", "agent-1", "", workflowBody(example1))
	if e, _ := body["error"].(map[string]any); resp.StatusCode != 403 || e["type"] != PermissionError || e["operationId"] != "fetch-data" {
		t.Errorf("permission: %d %v", resp.StatusCode, body)
	}
	// a slow execution answers 202 with its id
	sub.delay = 300 * time.Millisecond
	a.Wait = 50 * time.Millisecond
	resp, body = call("POST", "/api/v1/workflows/execute", "agent-1", "", workflowBody(wf))
	if resp.StatusCode != 202 || body["status"] != StatusRunning || resp.Header.Get("Location") == "" {
		t.Errorf("slow: %d %v", resp.StatusCode, body)
	}
	// oversize body
	a.MaxBodyBytes = 100
	if resp, _ = call("POST", "/api/v1/workflows/validate", "agent-1", "", workflowBody(wf)); resp.StatusCode != 413 {
		t.Errorf("oversize: %d", resp.StatusCode)
	}
}

type rateLimitsFunc func(context.Context, string) (*RateLimitStatus, error)

func (f rateLimitsFunc) Status(ctx context.Context, p string) (*RateLimitStatus, error) {
	return f(ctx, p)
}

func TestLiteralSecretWarning(t *testing.T) {
	e := New(Options{Policy: examplePolicy(t, "api.example.com")})
	_, res := e.Validate("a", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","headers":{"Authorization":"Bearer abc"},"outputPath":"/workflow/x"}}`), begin("a")))
	if !res.Valid || len(res.Warnings) != 1 || res.Warnings[0].Code != CodeLiteralSecret {
		t.Errorf("%+v", res)
	}
}

func jsonDecode(r interface{ Read([]byte) (int, error) }, v any) error {
	return json.NewDecoder(r).Decode(v)
}

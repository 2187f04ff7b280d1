package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type natsEnv struct {
	srv *streams.Embedded
	nc  *nats.Conn
	js  jetstream.JetStream
}

// startNATS runs an embedded JetStream server with the pipeline's streams.
func startNATS(t testing.TB) *natsEnv {
	t.Helper()
	srv, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	n := &natsEnv{srv: srv}
	n.nc = n.connect(t)
	n.js, _ = jetstream.New(n.nc)
	cfg := streams.DefaultConfig()
	cfg.Storage = jetstream.MemoryStorage
	if _, err := streams.Apply(tctx(t), n.js, cfg); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *natsEnv) connect(t testing.TB) *nats.Conn {
	nc, err := nats.Connect(n.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// kv creates a test bucket (production buckets belong to streams/).
func (n *natsEnv) kv(t testing.TB, name string) jetstream.KeyValue {
	kv, err := n.js.CreateKeyValue(tctx(t), jetstream.KeyValueConfig{Bucket: name, Storage: jetstream.MemoryStorage, TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func TestStoreDataOnKV(t *testing.T) {
	n := startNATS(t)
	local, session := n.kv(t, "A2E_LOCAL"), n.kv(t, "A2E_SESSION")
	en := newEnv(t, func(o *Options) { o.Storage = &Stores{Local: local, Session: session} })
	wf := lines(
		op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/d"}}`),
		op("keep", `{"StoreData":{"inputPath":"/workflow/d","storage":"localStorage","key":"results/latest"}}`),
		op("tmp", `{"StoreData":{"inputPath":"/workflow/d.value","storage":"sessionStorage","key":"v"}}`),
		begin("get", "keep", "tmp"))
	out, _ := en.run(t, wf)
	if out.Status != StatusSuccess {
		t.Fatalf("%+v", out.Error)
	}
	e, err := local.Get(tctx(t), "agent-1.results/latest")
	if err != nil || string(e.Value()) != `{"value":42}` {
		t.Fatalf("local: %v %v", e, err)
	}
	e, err = session.Get(tctx(t), "agent-1.req-1.v")
	if err != nil || string(e.Value()) != `42` {
		t.Fatalf("session: %v %v", e, err)
	}
	eqJSON(t, out.Results["keep"], `{"storage":"localStorage","key":"results/latest","location":"kv:A2E_LOCAL/agent-1.results/latest","bytes":12}`)
	// file storage is not enabled here: validation refuses it
	_, res := en.e.Validate("agent-1", strings.ReplaceAll(lines(op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/d"}}`),
		op("file", `{"StoreData":{"inputPath":"/workflow/d","storage":"file","key":"x.json"}}`), begin("get", "file")), "https://api.example.com", en.api.URL))
	if res.Valid || res.Errors[0].Code != CodePermission || res.Errors[0].OperationID != "file" {
		t.Errorf("file storage: %+v", res)
	}
	// a principal that is not a plain token gets an encoded scope
	if scopeToken("a.b c") == "a.b c" || scopeToken("agent-1") != "agent-1" {
		t.Error("scopeToken")
	}
}

func TestKVCacheSharedByWorkers(t *testing.T) {
	n := startNATS(t)
	bucket := n.kv(t, "A2E_CACHE")
	api := newTestAPI(t)
	clock := newFakeClock()
	mk := func() *Executor {
		return New(Options{Policy: examplePolicy(t, "127.0.0.1"), Clock: clock, Cache: &KVCache{KV: bucket, Clock: clock}})
	}
	w1, w2 := mk(), mk()
	wf := get(api.URL + "/users")
	run := func(e *Executor, wf string) *recorder {
		w, _ := Parse(wf)
		rec := &recorder{}
		out, err := e.Execute(tctx(t), "agent-1", "r", w, rec)
		if err != nil || out.Error != nil {
			t.Fatalf("%v %+v", err, out.Error)
		}
		return rec
	}
	run(w1, wf)
	rec := run(w2, wf)
	if api.hit("GET /users") != 1 || !rec.ends()[0].Cached {
		t.Fatalf("not shared: %d hits", api.hit("GET /users"))
	}
	// a write through the other worker invalidates
	run(w1, lines(op("p", `{"ApiCall":{"method":"POST","url":"`+api.URL+`/users","outputPath":"/workflow/p"}}`), begin("p")))
	run(w2, wf)
	if api.hit("GET /users") != 2 {
		t.Errorf("not invalidated: %d hits", api.hit("GET /users"))
	}
	// TTL
	clock.Advance(6 * time.Minute)
	run(w1, wf)
	if api.hit("GET /users") != 3 {
		t.Errorf("TTL: %d hits", api.hit("GET /users"))
	}
}

// jsSubmitter publishes like the ingress does.
type jsSubmitter struct{ js jetstream.JetStream }

func (s jsSubmitter) Submit(ctx context.Context, env *e2a.Envelope) error {
	subj, err := subjects.Request(Pool, env.RequestID)
	if err != nil {
		return err
	}
	m := nats.NewMsg(subj)
	m.Data, _ = json.Marshal(env)
	m.Header.Set(subjects.HeaderRequestID, env.RequestID)
	_, err = s.js.PublishMsg(ctx, m, jetstream.WithMsgID(env.RequestID))
	return err
}

func runPool(t testing.TB, nc *nats.Conn, h agent.Handler, opts ...agent.Option) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts = append([]agent.Option{agent.WithMetrics(prometheus.NewRegistry()), agent.WithDrainTimeout(2 * time.Second)}, opts...)
	go func() { done <- agent.Run(ctx, nc, Pool, h, opts...) }()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("agent.Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("agent.Run did not return")
		}
	}
	t.Cleanup(stop)
	return stop
}

func doJSON(t testing.TB, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

func workflowBody(wf string) string {
	b, _ := json.Marshal(map[string]string{"workflow": wf})
	return string(b)
}

// scanStreams reads every message of every stream and fails on secret.
func scanStreams(t testing.TB, n *natsEnv, secret string) int {
	t.Helper()
	total := 0
	for name := range n.js.StreamNames(tctx(t)).Name() {
		s, err := n.js.Stream(tctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := s.Info(tctx(t))
		if info.State.Msgs == 0 {
			continue
		}
		c, err := s.OrderedConsumer(tctx(t), jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.Fetch(int(info.State.Msgs), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			total++
			hdr, _ := json.Marshal(m.Headers())
			if bytes.Contains(m.Data(), []byte(secret)) || bytes.Contains(hdr, []byte(secret)) {
				t.Errorf("stream %s, subject %s holds the secret: %s", name, m.Subject(), m.Data())
			}
		}
	}
	return total
}

func TestWorkflowPoolAndRESTAPI(t *testing.T) {
	n := startNATS(t)
	api := newTestAPI(t)
	v := NewVault()
	_ = v.Add(Credential{ID: "api-key-123", Value: testSecret, Description: "test API key"})
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Vault: v,
		Storage: &Stores{Local: n.kv(t, "A2E_LOCAL")}, Cache: &KVCache{KV: n.kv(t, "A2E_CACHE")},
		Retry: RetryPolicy{MaxRetries: 1, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second, Multiplier: 2}})
	runPool(t, n.connect(t), exec)

	rest := &API{Executor: exec, Submitter: jsSubmitter{n.js}, Frames: &StreamFrames{Conn: n.nc}}
	mux := http.NewServeMux()
	rest.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	code, body := doJSON(t, "GET", srv.URL+"/health", "")
	if code != 200 || body["status"] != "healthy" || body["service"] != "a2e-server" {
		t.Errorf("health: %d %v", code, body)
	}
	code, body = doJSON(t, "GET", srv.URL+"/api/v1/capabilities", "")
	caps, _ := body["capabilities"].(map[string]any)
	if code != 200 || body["agent_id"] != Anonymous || len(caps["supportedOperations"].([]any)) != 8 ||
		caps["securityConstraints"].(map[string]any)["maxOperations"] != float64(20) || len(caps["availableCredentials"].([]any)) != 1 {
		t.Errorf("capabilities: %d %v", code, body)
	}
	if strings.Contains(canonical(normalize(body)), testSecret) {
		t.Error("capabilities show the secret")
	}

	wf := strings.ReplaceAll(lines(
		op("echo", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo","headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "}},"outputPath":"/workflow/echo"}}`),
		op("fetch", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("active", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"status","operator":"==","value":"active"}],"outputPath":"/workflow/active"}}`),
		op("save", `{"StoreData":{"inputPath":"/workflow/active","storage":"localStorage","key":"active"}}`),
		`{"type":"beginExecution","executionId":"exec-42","operationOrder":["echo","fetch","active","save"]}`), "https://api.example.com", api.URL)

	code, body = doJSON(t, "POST", srv.URL+"/api/v1/workflows/validate", workflowBody(wf))
	if code != 200 || body["valid"] != true {
		t.Fatalf("validate: %d %v", code, body)
	}
	code, body = doJSON(t, "POST", srv.URL+"/api/v1/workflows/execute", workflowBody(wf))
	if code != 200 || body["status"] != StatusSuccess || body["workflow_execution_id"] != "exec-42" {
		t.Fatalf("execute: %d %v", code, body)
	}
	id := body["request_id"].(string) // execution_id too: this API has no task index
	if len(body["results"].(map[string]any)["active"].([]any)) != 3 {
		t.Errorf("results: %v", body["results"])
	}

	// the frames: the plan (EventExecution), start and end per operation,
	// one final e2a.complete
	frames, err := (&StreamFrames{Conn: n.nc}).Frames(tctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 10 || frames[9].ResponseKind != e2a.KindComplete {
		t.Fatalf("%d frames", len(frames))
	}
	if c, err := frames[0].Chunk(); err != nil || c.DeltaKind != e2a.DeltaCustom || !strings.Contains(string(frames[0].Body), `"event":"`+EventExecution+`"`) {
		t.Errorf("frame 0, the plan: %s", frames[0].Body)
	}
	for i, f := range frames[1:9] {
		c, err := f.Chunk()
		d, _ := c.Delta.(map[string]any)
		want := e2a.ToolFunctionCall
		if i%2 == 1 {
			want = e2a.ToolFunctionResponse
		}
		if err != nil || c.DeltaKind != e2a.DeltaTool || d["type"] != want {
			t.Errorf("frame %d: %s", i+1, f.Body)
		}
	}
	cb, _ := frames[9].Complete()
	res, _ := cb.Result.(map[string]any)
	if res["execution_id"] != id || res["status"] != StatusSuccess || res["duration_ms"] == nil || res["results"] == nil {
		t.Errorf("complete: %s", frames[8].Body)
	}

	// the execution, replayed from the frames
	code, body = doJSON(t, "GET", srv.URL+"/api/v1/executions/"+id, "")
	if code != 200 || body["status"] != StatusSuccess || body["started_at"] == nil || body["completed_at"] == nil || len(body["operations"].([]any)) != 4 {
		t.Errorf("execution: %d %v", code, body)
	}
	code, _ = doJSON(t, "GET", srv.URL+"/api/v1/executions/nope", "")
	if code != 404 {
		t.Errorf("unknown execution: %d", code)
	}

	// an invalid workflow is refused before anything is published
	code, body = doJSON(t, "POST", srv.URL+"/api/v1/workflows/execute", workflowBody(`{"type":"beginExecution"}`))
	if code != 400 || body["error"].(map[string]any)["type"] != ValidationError {
		t.Errorf("invalid: %d %v", code, body)
	}
	code, _ = doJSON(t, "POST", srv.URL+"/api/v1/workflows/execute", `{"nope":1}`)
	if code != 400 {
		t.Errorf("bad body: %d", code)
	}
	code, _ = doJSON(t, "GET", srv.URL+"/api/v1/rate-limit/status", "")
	if code != 501 {
		t.Errorf("rate limit without limiter: %d", code)
	}

	// a failing workflow: final e2a.error in the spec's format, retryable
	api.flaky.Store(100)
	code, body = doJSON(t, "POST", srv.URL+"/api/v1/workflows/execute", workflowBody(get(api.URL+"/flaky")))
	if code != 200 || body["status"] != StatusFailed {
		t.Fatalf("failing: %d %v", code, body)
	}
	fid := body["execution_id"].(string)
	frames, _ = (&StreamFrames{Conn: n.nc}).Frames(tctx(t), fid)
	last := frames[len(frames)-1]
	eb, err := last.Error()
	if err != nil || eb.Code != "execution_error" || !eb.Retryable {
		t.Fatalf("error frame: %s", last.Body)
	}
	spec, _ := eb.Details["error"].(map[string]any)
	if spec["type"] != ExecutionError || spec["operationId"] != "a" || spec["suggestions"] == nil || spec["details"].(map[string]any)["statusCode"] == nil {
		t.Errorf("spec error: %s", last.Body)
	}
	code, body = doJSON(t, "GET", srv.URL+"/api/v1/executions/"+fid, "")
	if code != 200 || body["status"] != StatusFailed || body["error"].(map[string]any)["type"] != ExecutionError {
		t.Errorf("failed execution: %d %v", code, body)
	}

	// an invalid envelope sent straight to the pool (not through the API)
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "raw-invalid", Method: Method, Params: map[string]any{"workflow": `{"type":"operationUpdate"}`},
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
		t.Fatal(err)
	}
	final, err := rest.waitFinal(tctx(t), "raw-invalid")
	if err != nil {
		t.Fatal(err)
	}
	eb, _ = final.Error()
	if eb.Code != "validation_error" || eb.Retryable || eb.Details["validation"] == nil {
		t.Errorf("invalid via pool: %s", final.Body)
	}

	// nothing stored anywhere holds the credential
	if n := scanStreams(t, n, testSecret); n < 20 {
		t.Errorf("only %d messages scanned", n)
	}
}

func TestWorkerKilledMidWorkflow(t *testing.T) {
	n := startNATS(t)
	api := newTestAPI(t)
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1")})
	opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithHeartbeat(200 * time.Millisecond)}
	ncA := n.connect(t)
	aReturned := make(chan struct{}) // worker A's handler returned (the one of killed-1)
	runPool(t, ncA, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		defer close(aReturned)
		return exec.Serve(ctx, env, w)
	}), opts...)

	wf := strings.ReplaceAll(lines(
		op("fetch", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("pause", `{"Wait":{"duration":3000}}`),
		op("post", `{"ApiCall":{"method":"POST","url":"https://api.example.com/users","outputPath":"/workflow/p"}}`),
		begin("fetch", "pause", "post")), "https://api.example.com", api.URL)
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "killed-1", Method: Method, UserID: "agent-1",
		Params: map[string]any{"workflow": wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
		t.Fatal(err)
	}
	src := &StreamFrames{Conn: n.nc}
	// wait until the Wait operation started (frames 0..3: the plan, then
	// fetch's start and end, pause's start), then kill worker A
	testkit.Eventually(t, 10*time.Second, "the workflow's Wait to start (4 frames)", func() bool {
		fr, _ := src.Frames(tctx(t), "killed-1")
		return len(fr) >= 4
	})
	ncA.Close() // abrupt: no drain, no ack

	// worker B takes the redelivery: the request already has frames, so it
	// is closed with agent_interrupted (retryable), never restarted
	runPool(t, n.connect(t), exec, opts...)
	final, err := (&API{Frames: src}).waitFinal(tctx(t), "killed-1")
	if err != nil {
		t.Fatal(err)
	}
	frames, _ := src.Frames(tctx(t), "killed-1")
	if err := e2a.CheckFrames(frames); err != nil {
		t.Fatal(err)
	}
	eb, _ := final.Error()
	if eb.Code != e2a.ErrCodeAgentInterrupted || !eb.Retryable {
		t.Errorf("final: %s", final.Body)
	}
	// Worker A's handler wakes up and is fenced.
	testkit.Receive(t, aReturned, 20*time.Second, "worker A's handler did not return")
	frames2, _ := src.Frames(tctx(t), "killed-1")
	if len(frames2) != len(frames) || api.hit("POST /users") != 0 || api.hit("GET /users") != 1 {
		t.Errorf("after the kill: %d→%d frames, %d POST, %d GET", len(frames), len(frames2), api.hit("POST /users"), api.hit("GET /users"))
	}
	// fetch ended; the Wait the kill cut is listed failed (it cannot have
	// acted: no "may have acted"); post never started
	st := StatusFromFrames(frames)
	if st.Status != StatusFailed || len(st.Operations) != 2 || st.Operations[1].OperationID != "pause" ||
		st.Operations[1].Status != StatusFailed || !strings.Contains(string(st.Operations[1].Error), cutMessage) ||
		strings.Contains(string(st.Operations[1].Error), cutActedMessage) {
		t.Errorf("status: %+v", st)
	}
}

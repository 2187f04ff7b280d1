package securitytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// bobCanary is in every item Bob creates; no answer to anyone else may
// contain it.
const bobCanary = "BOB_CANARY_e7c1d9a2"

// rpcBody is a JSON-RPC 2.0 request.
func rpcBody(method string, params string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"m-1","method":%q,"params":%s}`, method, params)
}

// a2aMessage is A2A message/send params with extra message fields.
func a2aMessage(extra string) string {
	return `{"message":{"kind":"message","role":"user","messageId":"msg-` + fmt.Sprint(time.Now().UnixNano()) + `",` + extra +
		`"parts":[{"kind":"text","text":"` + bobCanary + `"}]}}`
}

// v1Message is A2A v1.0 SendMessage params with extra message fields.
func v1Message(extra string) string {
	return `{"message":{"role":"ROLE_USER","messageId":"msg-` + fmt.Sprint(time.Now().UnixNano()) + `",` + extra +
		`"parts":[{"text":"` + bobCanary + `"}]}}`
}

// rpcError returns the code of the first JSON-RPC error in an answer, JSON
// or a stream (SSE data: lines or NDJSON; AgentVault's stream error names
// it as a string), 0 when there is none.
func rpcError(b []byte) int {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimPrefix(bytes.TrimSpace(sc.Bytes()), []byte("data:"))
		var m struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(bytes.TrimSpace(line), &m) != nil || m.Error == nil {
			continue
		}
		var obj struct {
			Code int `json:"code"`
		}
		if json.Unmarshal(m.Error, &obj) == nil {
			return obj.Code
		}
		// AgentVault's stream error: {"error": "<code>", "message": …}.
		var code string
		if json.Unmarshal(m.Error, &code) == nil {
			if n, err := strconv.Atoi(code); err == nil {
				return n
			}
		}
	}
	return 0
}

// field returns a string at a dotted path of a JSON answer ("result.id").
func field(b []byte, path string) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// sseField returns the first string value of key in a stream's events.
func sseField(b []byte, key string) string {
	m := regexp.MustCompile(`"` + key + `":"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// bobsData is one item of every kind Bob owns.
type bobsData struct {
	request, a2aTask, a2aContext, avTask, session, a2eKey, wfKey, wfExec string
}

// createBobsData makes Bob's items and checks Bob himself can read them.
func (s *suite) createBobsData(bob map[string]string) bobsData {
	t := s.t
	var d bobsData
	d.request = "bob-req-1"
	r := s.do(http.MethodPost, "/v1/requests?agent=echo&wait=true", fmt.Appendf(nil, `{"request_id":%q,"params":{"text":%q}}`, d.request, bobCanary), bob)
	if r.status != 200 || !bytes.Contains(r.body, []byte(bobCanary)) {
		t.Fatalf("bob's E2A request: %s", r)
	}
	// message/stream, whose events name the task (a message/send answered
	// by a plain reply is a Message without one).
	r = s.do(http.MethodPost, "/a2a?agent=echo", rpcBody("message/stream", a2aMessage("")), with(bob, "Accept", "text/event-stream"))
	d.a2aTask, d.a2aContext = sseField(r.body, "taskId"), sseField(r.body, "contextId")
	if d.a2aTask == "" || d.a2aContext == "" {
		t.Fatalf("bob's A2A task: %s", r.body)
	}
	r = s.do(http.MethodPost, "/a2a?agent=echo", rpcBody("tasks/send",
		`{"message":{"role":"user","parts":[{"type":"text","content":"`+bobCanary+`"}]}}`), bob)
	if d.avTask = field(r.body, "result.id"); d.avTask == "" {
		t.Fatalf("bob's AgentVault task: %s", r)
	}
	testkit.Eventually(t, 10*time.Second, "bob's AgentVault task to finish", func() bool {
		r = s.do(http.MethodPost, "/a2a", rpcBody("tasks/get", `{"id":"`+d.avTask+`"}`), bob)
		return field(r.body, "result.state") == "COMPLETED"
	})
	r = s.do(http.MethodPost, "/acp?agent=echo", rpcBody("session/new", `{"cwd":"/tmp","mcpServers":[]}`), bob)
	if d.session = field(r.body, "result.sessionId"); d.session == "" {
		t.Fatalf("bob's ACP session: %s", r)
	}
	r = s.do(http.MethodPost, "/acp?agent=echo", rpcBody("session/prompt", `{"sessionId":"`+d.session+`","prompt":[{"type":"text","text":"`+bobCanary+`"}]}`), bob)
	if !bytes.Contains(r.body, []byte(bobCanary)) || !bytes.Contains(r.body, []byte("stopReason")) {
		t.Fatalf("bob's ACP prompt: %s", r)
	}
	d.a2eKey = "bob-a2e-1"
	r = s.do(http.MethodPost, "/a2e?agent=echo", []byte(`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"`+bobCanary+`"}`+"\n"),
		with(bob, "Idempotency-Key", d.a2eKey))
	if !bytes.Contains(r.body, []byte(bobCanary)) {
		t.Fatalf("bob's A2E request: %s", r)
	}
	d.wfKey = "bob-wf-1"
	wf := `{"type":"operationUpdate","operationId":"wait_` + bobCanary + `","operation":{"Wait":{"duration":1}}}` + "\n" +
		`{"type":"beginExecution","executionId":"bob-exec-1","operationOrder":["wait_` + bobCanary + `"]}`
	body, _ := json.Marshal(map[string]string{"workflow": wf})
	r = s.do(http.MethodPost, "/api/v1/workflows/execute", body, with(bob, "Idempotency-Key", d.wfKey))
	if d.wfExec = field(r.body, "execution_id"); r.status != 200 || d.wfExec == "" || !bytes.Contains(r.body, []byte(bobCanary)) {
		t.Fatalf("bob's workflow: %s", r)
	}
	return d
}

// isolationCase is one attempt on Bob's data.
type isolationCase struct {
	name, method, path string
	body               []byte
	hdr                map[string]string
	status             []int // accepted HTTP statuses
	rpc                int   // expected JSON-RPC error code (0: none checked)
}

// crossPrincipalCases are every endpoint and method that reads, continues,
// cancels, subscribes to, lists or deduplicates something, aimed at Bob's
// items with the credentials in hdr.
func crossPrincipalCases(d bobsData, hdr map[string]string) []isolationCase {
	sse := with(hdr, "Accept", "text/event-stream")
	nd := with(hdr, "Accept", "application/x-ndjson")
	dup := fmt.Appendf(nil, `{"request_id":%q,"params":{"text":"mine now"}}`, d.request)
	plain := []byte(`{"params":{"text":"mine now"}}`)
	a2a := func(method, params string) []byte { return rpcBody(method, params) }
	return []isolationCase{
		// E2A: deduplication, reads, streams.
		{"e2a/POST duplicate request_id", "POST", "/v1/requests", dup, hdr, []int{409}, 0},
		{"e2a/POST duplicate ?wait=true", "POST", "/v1/requests?wait=true", dup, hdr, []int{409}, 0},
		{"e2a/POST duplicate SSE", "POST", "/v1/requests", dup, sse, []int{409}, 0},
		{"e2a/POST duplicate NDJSON", "POST", "/v1/requests", dup, nd, []int{409}, 0},
		{"e2a/POST Idempotency-Key duplicate", "POST", "/v1/requests?wait=true", plain, with(hdr, "Idempotency-Key", d.request), []int{409}, 0},
		{"e2a/GET request", "GET", "/v1/requests/" + d.request, nil, hdr, []int{404}, 0},
		{"e2a/GET request ?wait=true", "GET", "/v1/requests/" + d.request + "?wait=true", nil, hdr, []int{404}, 0},
		{"e2a/GET stream SSE", "GET", "/v1/requests/" + d.request + "/stream", nil, sse, []int{404}, 0},
		{"e2a/GET stream NDJSON", "GET", "/v1/requests/" + d.request + "/stream", nil, nd, []int{404}, 0},
		{"e2a/GET stream resumed", "GET", "/v1/requests/" + d.request + "/stream?from=1", nil, sse, []int{404}, 0},
		// A2A v0.3: reads, continuation, cancel, subscription, contexts.
		{"a2a/tasks/get", "POST", "/a2a", a2a("tasks/get", `{"id":"`+d.a2aTask+`"}`), hdr, []int{200}, -32001},
		{"a2a/tasks/get historyLength", "POST", "/a2a", a2a("tasks/get", `{"id":"`+d.a2aTask+`","historyLength":10}`), hdr, []int{200}, -32001},
		{"a2a/tasks/cancel", "POST", "/a2a", a2a("tasks/cancel", `{"id":"`+d.a2aTask+`"}`), hdr, []int{200}, -32001},
		{"a2a/tasks/resubscribe", "POST", "/a2a", a2a("tasks/resubscribe", `{"id":"`+d.a2aTask+`"}`), sse, []int{200}, -32001},
		{"a2a/message/send taskId", "POST", "/a2a?agent=echo", a2a("message/send", a2aMessage(`"taskId":"`+d.a2aTask+`",`)), hdr, []int{200}, -32001},
		{"a2a/message/send taskId+contextId", "POST", "/a2a?agent=echo", a2a("message/send", a2aMessage(`"taskId":"`+d.a2aTask+`","contextId":"`+d.a2aContext+`",`)), hdr, []int{200}, -32001},
		{"a2a/message/stream taskId", "POST", "/a2a?agent=echo", a2a("message/stream", a2aMessage(`"taskId":"`+d.a2aTask+`",`)), sse, []int{200}, -32001},
		{"a2a/message/send contextId", "POST", "/a2a?agent=echo", a2a("message/send", a2aMessage(`"contextId":"`+d.a2aContext+`",`)), hdr, []int{200}, -32602},
		{"a2a/message/stream contextId", "POST", "/a2a?agent=echo", a2a("message/stream", a2aMessage(`"contextId":"`+d.a2aContext+`",`)), sse, []int{200}, -32602},
		{"a2a/message/send Idempotency-Key duplicate", "POST", "/a2a?agent=echo", a2a("message/send", a2aMessage("")), with(hdr, "Idempotency-Key", d.request), []int{200}, -32602},
		// A2A v1.0, both bindings: the same tasks.
		{"a2av1/GetTask", "POST", ingress.A2AV1Path, a2a("GetTask", `{"id":"`+d.a2aTask+`"}`), hdr, []int{200}, -32001},
		{"a2av1/CancelTask", "POST", ingress.A2AV1Path, a2a("CancelTask", `{"id":"`+d.a2aTask+`"}`), hdr, []int{200}, -32001},
		{"a2av1/SubscribeToTask", "POST", ingress.A2AV1Path, a2a("SubscribeToTask", `{"id":"`+d.a2aTask+`"}`), sse, []int{200}, -32001},
		{"a2av1/SendMessage taskId", "POST", ingress.A2AV1Path + "?agent=echo", a2a("SendMessage", v1Message(`"taskId":"`+d.a2aTask+`",`)), hdr, []int{200}, -32001},
		{"a2av1/SendStreamingMessage taskId", "POST", ingress.A2AV1Path + "?agent=echo", a2a("SendStreamingMessage", v1Message(`"taskId":"`+d.a2aTask+`",`)), sse, []int{200}, -32001},
		{"a2av1/SendMessage contextId", "POST", ingress.A2AV1Path + "?agent=echo", a2a("SendMessage", v1Message(`"contextId":"`+d.a2aContext+`",`)), hdr, []int{200}, -32602},
		{"a2av1/list ListTasks", "POST", ingress.A2AV1Path, a2a("ListTasks", `{}`), hdr, []int{200}, 0},
		{"a2av1/list ListTasks contextId", "POST", ingress.A2AV1Path, a2a("ListTasks", `{"contextId":"`+d.a2aContext+`"}`), hdr, []int{200}, 0},
		{"a2av1/REST GET task", "GET", ingress.A2AV1Path + "/tasks/" + d.a2aTask, nil, hdr, []int{404}, 0},
		{"a2av1/REST cancel", "POST", ingress.A2AV1Path + "/tasks/" + d.a2aTask + ":cancel", []byte(`{}`), hdr, []int{404}, 0},
		{"a2av1/REST subscribe", "POST", ingress.A2AV1Path + "/tasks/" + d.a2aTask + ":subscribe", []byte(`{}`), sse, []int{200, 404}, 0},
		{"a2av1/list REST GET tasks", "GET", ingress.A2AV1Path + "/tasks", nil, hdr, []int{200}, 0},
		{"a2av1/REST message:send taskId", "POST", ingress.A2AV1Path + "/message:send?agent=echo", []byte(v1Message(`"taskId":"` + d.a2aTask + `",`)), hdr, []int{404}, 0},
		// AgentVault profile.
		{"agentvault/tasks/get", "POST", "/a2a", a2a("tasks/get", `{"id":"`+d.avTask+`"}`), hdr, []int{200}, -32001},
		{"agentvault/tasks/cancel", "POST", "/a2a", a2a("tasks/cancel", `{"id":"`+d.avTask+`"}`), hdr, []int{200}, -32001},
		{"agentvault/tasks/send id", "POST", "/a2a?agent=echo", a2a("tasks/send", `{"id":"`+d.avTask+`","message":{"role":"user","parts":[{"type":"text","content":"x"}]}}`), hdr, []int{200}, -32001},
		{"agentvault/tasks/sendSubscribe id", "POST", "/a2a?agent=echo", a2a("tasks/sendSubscribe", `{"id":"`+d.avTask+`","message":{"role":"user","parts":[{"type":"text","content":"x"}]}}`), sse, []int{200}, -32001},
		// ACP sessions.
		{"acp/session/load", "POST", "/acp", a2a("session/load", `{"sessionId":"`+d.session+`","cwd":"/tmp","mcpServers":[]}`), hdr, []int{200}, jsonrpc.CodeACPResourceNotFound},
		{"acp/session/prompt", "POST", "/acp?agent=echo", a2a("session/prompt", `{"sessionId":"`+d.session+`","prompt":[{"type":"text","text":"x"}]}`), hdr, []int{200}, jsonrpc.CodeACPResourceNotFound},
		{"acp/session/cancel", "POST", "/acp", a2a("session/cancel", `{"sessionId":"`+d.session+`"}`), hdr, []int{200}, jsonrpc.CodeACPResourceNotFound},
		{"acp/session/prompt Idempotency-Key duplicate", "POST", "/acp?agent=echo", a2a("session/prompt", `{"sessionId":"`+d.session+`","prompt":[{"type":"text","text":"x"}]}`), with(hdr, "Idempotency-Key", d.request), []int{200}, jsonrpc.CodeACPResourceNotFound},
		// A2E: deduplication is its only read.
		{"a2e/Idempotency-Key duplicate", "POST", "/a2e?agent=echo", []byte(`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"x"}` + "\n"), with(hdr, "Idempotency-Key", d.a2eKey), []int{200}, 0},
		// Workflows: executions by request id and by executionId, dedupe.
		{"workflow/GET execution", "GET", "/api/v1/executions/" + d.wfExec, nil, hdr, []int{404}, 0},
		{"workflow/GET executionId", "GET", "/api/v1/executions/bob-exec-1", nil, hdr, []int{404}, 0},
		{"workflow/execute Idempotency-Key duplicate", "POST", "/api/v1/workflows/execute",
			[]byte(`{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"w\",\"operation\":{\"Wait\":{\"duration\":1}}}\n{\"type\":\"beginExecution\",\"executionId\":\"e\",\"operationOrder\":[\"w\"]}"}`),
			with(hdr, "Idempotency-Key", d.wfKey), []int{409}, 0},
		// The console: list, filters, detail, stream.
		{"console/list", "GET", "/console/api/requests", nil, hdr, []int{200}, 0},
		{"console/list user=bob", "GET", "/console/api/requests?user=bob", nil, hdr, []int{200}, 0},
		{"console/list request_id", "GET", "/console/api/requests?request_id=" + d.request, nil, hdr, []int{200}, 0},
		{"console/list task", "GET", "/console/api/requests?task=" + d.a2aTask, nil, hdr, []int{200}, 0},
		{"console/list session", "GET", "/console/api/requests?session=" + d.session, nil, hdr, []int{200}, 0},
		{"console/list context", "GET", "/console/api/requests?context=" + d.a2aContext, nil, hdr, []int{200}, 0},
		{"console/detail", "GET", "/console/api/requests/" + d.request, nil, hdr, []int{404}, 0},
		{"console/stream", "GET", "/console/api/requests/" + d.request + "/stream", nil, sse, []int{404}, 0},
		{"console/detail ?id=", "GET", "/console/api/request?id=" + d.request, nil, hdr, []int{404}, 0},
		{"console/stream ?id=", "GET", "/console/api/request/stream?id=" + d.request, nil, sse, []int{404}, 0},
	}
}

// TestTenantIsolation is the cross-principal matrix: Bob owns one item of
// every kind; Alice tries every endpoint and method on each. No answer to
// Alice contains Bob's canary, each is the protocol's not-found (or a
// conflict for a duplicate id), and Bob's items are unchanged afterwards.
// A principal with the audit role reads them and cannot cancel them.
func TestTenantIsolation(t *testing.T) {
	s := start(t)
	alice := map[string]string{"X-Api-Key": keyAlice}
	// "Bob" is principal dave here: bob's key has a low rate limit in
	// this suite, and the owner makes many calls.
	bob := map[string]string{"X-Api-Key": keyDave}
	ops := map[string]string{"X-Api-Key": keyOps}
	d := s.createBobsData(bob)

	cases := crossPrincipalCases(d, alice)
	for _, c := range cases {
		r := s.do(c.method, c.path, c.body, c.hdr)
		ok := r.err == nil && slices.Contains(c.status, r.status) && !bytes.Contains(r.body, []byte(bobCanary))
		if c.rpc != 0 {
			ok = ok && rpcError(r.body) == c.rpc
		}
		if strings.HasPrefix(c.name, "a2e/") {
			ok = ok && bytes.Contains(r.body, []byte(`"conflict"`))
		}
		if strings.HasPrefix(c.name, "console/list") || strings.HasPrefix(c.name, "a2av1/list") {
			for _, id := range []string{d.request, d.a2aTask, d.a2aContext, d.avTask, d.session, d.wfExec, d.a2eKey} {
				ok = ok && !bytes.Contains(r.body, []byte(id))
			}
		}
		s.check("tenant", c.name, ok, "alice: %s", r)
	}

	// Bob's items are as he left them: his task has his one turn, not
	// cancelled; his session answers him; his request is whole.
	r := s.do(http.MethodPost, "/a2a", rpcBody("tasks/get", `{"id":"`+d.a2aTask+`"}`), bob)
	s.check("tenant", "bob's A2A task unchanged", field(r.body, "result.status.state") == "completed" &&
		bytes.Count(r.body, []byte(`"role":"user"`)) == 1 && bytes.Contains(r.body, []byte(bobCanary)), "bob: %s", r)
	r = s.do(http.MethodPost, "/a2a", rpcBody("tasks/get", `{"id":"`+d.avTask+`"}`), bob)
	s.check("tenant", "bob's AgentVault task unchanged", field(r.body, "result.state") == "COMPLETED" && bytes.Contains(r.body, []byte(bobCanary)), "bob: %s", r)
	r = s.do(http.MethodGet, "/v1/requests/"+d.request, nil, bob)
	s.check("tenant", "bob's request readable by bob", r.status == 200 && bytes.Contains(r.body, []byte(bobCanary)), "bob: %s", r)
	r = s.do(http.MethodPost, "/v1/requests", fmt.Appendf(nil, `{"request_id":%q,"params":{"text":"again"}}`, d.request), bob)
	s.check("tenant", "bob's own duplicate is a duplicate", r.status == 202 && bytes.Contains(r.body, []byte(`"duplicate":true`)), "bob: %s", r)
	r = s.do(http.MethodGet, "/api/v1/executions/bob-exec-1", nil, bob)
	s.check("tenant", "bob's execution by executionId", r.status == 200 && bytes.Contains(r.body, []byte(bobCanary)), "bob: %s", r)

	// The audit role reads everyone's data but changes nothing.
	r = s.do(http.MethodGet, "/v1/requests/"+d.request, nil, ops)
	s.check("tenant", "audit reads bob's request", r.status == 200 && bytes.Contains(r.body, []byte(bobCanary)), "ops: %s", r)
	r = s.do(http.MethodPost, "/a2a", rpcBody("tasks/get", `{"id":"`+d.a2aTask+`"}`), ops)
	s.check("tenant", "audit reads bob's task", bytes.Contains(r.body, []byte(bobCanary)), "ops: %s", r)
	r = s.do(http.MethodGet, "/console/api/requests/"+d.request, nil, ops)
	s.check("tenant", "audit opens bob's request in the console", r.status == 200 && bytes.Contains(r.body, []byte(bobCanary)), "ops: %s", r)
	r = s.do(http.MethodPost, ingress.A2AV1Path, rpcBody("ListTasks", `{"contextId":"`+d.a2aContext+`"}`), ops)
	s.check("tenant", "audit lists bob's task (A2A v1.0)", bytes.Contains(r.body, []byte(d.a2aTask)), "ops: %s", r)
	r = s.do(http.MethodPost, ingress.A2AV1Path, rpcBody("ListTasks", `{"contextId":"`+d.a2aContext+`"}`), bob)
	s.check("tenant", "bob lists his task (A2A v1.0)", bytes.Contains(r.body, []byte(d.a2aTask)), "bob: %s", r)
	r = s.do(http.MethodPost, "/a2a", rpcBody("tasks/cancel", `{"id":"`+d.a2aTask+`"}`), ops)
	s.check("tenant", "audit cannot cancel bob's task", rpcError(r.body) == -32001, "ops: %s", r)
	r = s.do(http.MethodPost, "/v1/requests", fmt.Appendf(nil, `{"request_id":%q}`, d.request), ops)
	s.check("tenant", "audit cannot take bob's id", r.status == 409 && !bytes.Contains(r.body, []byte(bobCanary)), "ops: %s", r)
	s.report()
}

// TestOptionalAuthIdentity: with optional auth (none + API keys) an
// unauthenticated request can never carry a configured principal's identity:
// whatever user it claims (body user_id, X-User-ID, A2A metadata), it is
// the anonymous principal's, and that principal's credentials do not read it.
func TestOptionalAuthIdentity(t *testing.T) {
	s := start(t, func(c *ingress.AuthConfig) { c.Schemes = append(c.Schemes, "none") })
	anon := map[string]string{"X-User-ID": "alice"}
	alice := map[string]string{"X-Api-Key": keyAlice}
	r := s.do(http.MethodPost, "/v1/requests?agent=echo&wait=true", []byte(`{"request_id":"claim-1","user_id":"alice","params":{"text":"claimed"}}`), anon)
	s.check("identity", "anonymous request accepted", r.status == 200, "%s", r)
	r = s.do(http.MethodGet, "/v1/requests/claim-1", nil, alice)
	s.check("identity", "alice cannot read the anonymous request claiming her", r.status == 404, "%s", r)
	r = s.do(http.MethodGet, "/v1/requests/claim-1", nil, nil)
	s.check("identity", "stored as the anonymous principal's", r.status == 200 &&
		bytes.Contains(r.body, []byte(`"user_id":"anonymous"`)) && !bytes.Contains(r.body, []byte(`"user_id":"alice"`)), "%s", r)
	r = s.do(http.MethodPost, "/a2a?agent=echo", rpcBody("message/stream",
		`{"message":{"kind":"message","role":"user","messageId":"m-claim","metadata":{"user_id":"alice"},"parts":[{"kind":"text","text":"hi"}]}}`),
		with(anon, "Accept", "text/event-stream"))
	task := sseField(r.body, "taskId")
	r = s.do(http.MethodPost, "/a2a", rpcBody("tasks/get", `{"id":"`+task+`"}`), alice)
	s.check("identity", "alice cannot read the anonymous A2A task claiming her", task != "" && rpcError(r.body) == -32001, "%s", r)
	// And an anonymous caller cannot read alice's.
	r = s.do(http.MethodPost, "/v1/requests?agent=echo&wait=true", []byte(`{"request_id":"alice-own-1","params":{"text":"alice's"}}`), alice)
	s.check("identity", "alice's request accepted", r.status == 200, "%s", r)
	r = s.do(http.MethodGet, "/v1/requests/alice-own-1", nil, anon)
	s.check("identity", "anonymous cannot read alice's request", r.status == 404, "%s", r)
	r = s.do(http.MethodPost, "/v1/requests", []byte(`{"request_id":"alice-own-1"}`), anon)
	s.check("identity", "anonymous cannot take alice's id", r.status == 409 && !bytes.Contains(r.body, []byte("alice's")), "%s", r)
	s.report()
}

package securitytest

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// TestTenantIsolationGaps is the cross-principal matrix's gaps: the
// paths that reach another principal's task or session without naming it
// as the matrix does (an E2A request's task_id or session_id, one
// protocol's task by another's method, a HEAD, the HTTP+JSON listing's
// context filter, the workflow API by a task id), a turn of the caller's
// own task or session under an id of Bob's (Idempotency-Key, request_id:
// a conflict, never Bob's answer nor a silent duplicate), and the audit
// role's writes. No answer may carry Bob's canary, and each is refused.
func TestTenantIsolationGaps(t *testing.T) {
	s := start(t)
	alice := map[string]string{"X-Api-Key": keyAlice}
	bob := map[string]string{"X-Api-Key": keyDave}
	ops := map[string]string{"X-Api-Key": keyOps}
	d := s.createBobsData(bob)
	e2aTurn := func(field, id string) []byte {
		return fmt.Appendf(nil, `{%q:%q,"params":{"text":"mine now"}}`, field, id)
	}
	for who, hdr := range map[string]map[string]string{"alice": alice, "audit": ops} {
		cases := []isolationCase{
			{"e2a/POST task_id of an A2A task", "POST", "/v1/requests?agent=echo&wait=true", e2aTurn("task_id", d.a2aTask), hdr, []int{409}, 0},
			{"e2a/POST task_id of an AgentVault task", "POST", "/v1/requests?agent=echo&wait=true", e2aTurn("task_id", d.avTask), hdr, []int{409}, 0},
			{"e2a/POST session_id of an ACP session", "POST", "/v1/requests?agent=echo&wait=true", e2aTurn("session_id", d.session), hdr, []int{409}, 0},
			{"a2a/message/send taskId of an AgentVault task", "POST", "/a2a?agent=echo", rpcBody("message/send", a2aMessage(`"taskId":"`+d.avTask+`",`)), hdr, []int{200}, -32001},
			{"agentvault/tasks/send id of an A2A task", "POST", "/a2a?agent=echo", rpcBody("tasks/send", `{"id":"`+d.a2aTask+`","message":{"role":"user","parts":[{"type":"text","content":"x"}]}}`), hdr, []int{200}, -32001},
			{"a2av1/SendMessage taskId of an AgentVault task", "POST", ingress.A2AV1Path + "?agent=echo", rpcBody("SendMessage", v1Message(`"taskId":"`+d.avTask+`",`)), hdr, []int{200}, -32001},
			{"acp/session/prompt sessionId of an A2A task", "POST", "/acp?agent=echo", rpcBody("session/prompt", `{"sessionId":"`+d.a2aTask+`","prompt":[{"type":"text","text":"x"}]}`), hdr, []int{200}, jsonrpc.CodeACPResourceNotFound},
		}
		if who == "alice" {
			own := s.createOwn(hdr)
			cases = append(cases,
				isolationCase{"acp/own session/prompt Idempotency-Key of bob's request", "POST", "/acp?agent=echo", rpcBody("session/prompt", `{"sessionId":"`+own.session+`","prompt":[{"type":"text","text":"x"}]}`), with(hdr, "Idempotency-Key", d.request), []int{200}, -32602},
				isolationCase{"agentvault/own task tasks/send Idempotency-Key of bob's request", "POST", "/a2a?agent=echo", rpcBody("tasks/send", `{"id":"`+own.avTask+`","message":{"role":"user","parts":[{"type":"text","content":"x"}]}}`), with(hdr, "Idempotency-Key", d.request), []int{200}, -32602},
				isolationCase{"agentvault/own task tasks/send Idempotency-Key of bob's task", "POST", "/a2a?agent=echo", rpcBody("tasks/send", `{"id":"`+own.avTask+`","message":{"role":"user","parts":[{"type":"text","content":"x"}]}}`), with(hdr, "Idempotency-Key", d.a2aTask), []int{200}, -32602},
				isolationCase{"e2a/own AgentVault task_id request_id of bob's", "POST", "/v1/requests?agent=echo&wait=true", fmt.Appendf(nil, `{"task_id":%q,"request_id":%q,"params":{"text":"x"}}`, own.avTask, d.request), hdr, []int{409}, 0},
				isolationCase{"e2a/own session_id request_id of bob's", "POST", "/v1/requests?agent=echo&wait=true", fmt.Appendf(nil, `{"session_id":%q,"request_id":%q,"params":{"text":"x"}}`, own.session, d.a2aTask), hdr, []int{409}, 0},
				isolationCase{"a2e/Idempotency-Key of bob's E2A request", "POST", "/a2e?agent=echo", []byte(`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"x"}` + "\n"), with(hdr, "Idempotency-Key", d.request), []int{200, 409}, 0},
				isolationCase{"agentvault/tasks/send Idempotency-Key of bob's request", "POST", "/a2a?agent=echo", rpcBody("tasks/send", `{"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}`), with(hdr, "Idempotency-Key", d.request), []int{200}, -32602},
				isolationCase{"a2av1/SendMessage Idempotency-Key of bob's request", "POST", ingress.A2AV1Path + "?agent=echo", rpcBody("SendMessage", v1Message("")), with(hdr, "Idempotency-Key", d.request), []int{200}, -32602},
			)
			cases = append(cases,
				isolationCase{"e2a/HEAD request", "HEAD", "/v1/requests/" + d.request, nil, hdr, []int{404}, 0},
				isolationCase{"e2a/HEAD stream", "HEAD", "/v1/requests/" + d.request + "/stream", nil, with(hdr, "Accept", "text/event-stream"), []int{404}, 0},
				isolationCase{"a2a/tasks/get of an ACP session", "POST", "/a2a", rpcBody("tasks/get", `{"id":"`+d.session+`"}`), hdr, []int{200}, -32001},
				isolationCase{"a2av1/list REST GET tasks contextId", "GET", ingress.A2AV1Path + "/tasks?contextId=" + d.a2aContext, nil, hdr, []int{200}, 0},
				isolationCase{"workflow/GET execution by A2A task id", "GET", "/api/v1/executions/" + d.a2aTask, nil, hdr, []int{404}, 0},
				isolationCase{"workflow/GET execution by request id", "GET", "/api/v1/executions/" + d.request, nil, hdr, []int{404}, 0},
				isolationCase{"workflow/GET execution by session id", "GET", "/api/v1/executions/" + d.session, nil, hdr, []int{404}, 0},
				isolationCase{"console/detail A2A task", "GET", "/console/api/requests/" + d.a2aTask, nil, hdr, []int{404}, 0},
			)
		}
		for _, c := range cases {
			r := s.do(c.method, c.path, c.body, c.hdr)
			ok := r.err == nil && slices.Contains(c.status, r.status) && !bytes.Contains(r.body, []byte(bobCanary))
			if c.rpc != 0 {
				ok = ok && rpcError(r.body) == c.rpc
			}
			if strings.Contains(c.name, "list") {
				ok = ok && !bytes.Contains(r.body, []byte(d.a2aTask))
			}
			s.check("tenant-review", who+" "+c.name, ok, "%s: %s", who, r)
		}
	}
	// Bob's task still has his one turn.
	r := s.do(http.MethodPost, "/a2a", rpcBody("tasks/get", `{"id":"`+d.a2aTask+`"}`), bob)
	s.check("tenant-review", "bob's A2A task unchanged", field(r.body, "result.status.state") == "completed" &&
		bytes.Count(r.body, []byte(`"role":"user"`)) == 1, "bob: %s", r)
	s.report()
}

// ownData is alice's own task and session, which she continues with
// another principal's ids.
type ownData struct{ a2aTask, avTask, session string }

// createOwn makes an A2A task and an ACP session of the principal of hdr.
func (s *suite) createOwn(hdr map[string]string) ownData {
	var o ownData
	r := s.do(http.MethodPost, "/a2a?agent=echo", rpcBody("message/stream", a2aMessage("")), with(hdr, "Accept", "text/event-stream"))
	o.a2aTask = sseField(r.body, "taskId")
	r = s.do(http.MethodPost, "/acp?agent=echo", rpcBody("session/new", `{"cwd":"/tmp","mcpServers":[]}`), hdr)
	o.session = field(r.body, "result.sessionId")
	r = s.do(http.MethodPost, "/a2a?agent=echo", rpcBody("tasks/send", `{"message":{"role":"user","parts":[{"type":"text","content":"own"}]}}`), hdr)
	o.avTask = field(r.body, "result.id")
	if o.a2aTask == "" || o.session == "" || o.avTask == "" {
		s.t.Fatalf("own task %q, session %q", o.a2aTask, o.session)
	}
	return o
}

package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
)

// TestE2AContextIDOfAnotherPrincipalRefused: alice's A2A message claims
// the context id alice-ctx-1. Bob's E2A requests naming that context_id
// (a new task, no task, a later turn of his own task, on a pool's path)
// are refused 409 conflict, as A2A refuses a contextId of another
// principal's and as E2A refuses a task_id of another's: nothing
// published, nothing of alice's said. Alice's own E2A request in her
// context is taken. A context_id an E2A request uses first is its
// principal's: alice's A2A message naming bob's is refused.
func TestE2AContextIDOfAnotherPrincipalRefused(t *testing.T) {
	const aliceKey, bobKey = "ak_e2actx_alice_0123456", "ak_e2actx_bob_000123456"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())
	a2aSend := func(key, ctxID, text string) string {
		t.Helper()
		_, b := testkit.Do(t, http.MethodPost, p.URL+"/a2a?agent=demo", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{`+
			`"contextId":"`+ctxID+`","kind":"message","role":"user","messageId":"m-`+text+`","parts":[{"kind":"text","text":"`+text+`"}]}}}`,
			"X-Api-Key", key)
		return string(b)
	}
	if b := a2aSend(aliceKey, "alice-ctx-1", "alice-first"); strings.Contains(b, `"error"`) {
		t.Fatalf("alice's A2A message in her context: %s", b)
	}
	post := func(url, key, body string) (int, string) {
		t.Helper()
		resp, b := testkit.Do(t, http.MethodPost, url, body, "X-Api-Key", key)
		return resp.StatusCode, string(b)
	}
	refused := func(what, url, requestID, body string) {
		t.Helper()
		status, b := post(url, bobKey, body)
		e := e2aError(t, []byte(b))
		if status != http.StatusConflict || e.Code != e2aproto.CodeConflict || strings.Contains(b, "alice") || !strings.HasPrefix(e.Message, "context_id ") {
			t.Fatalf("%s naming alice's context: %d %s; want 409 conflict naming context_id, saying nothing of it", what, status, b)
		}
		checkNotPublished(t, p.NC, requestID)
	}
	refused("bob's new E2A task", p.URL+"/v1/requests?agent=demo", "bob-task-in-actx-r",
		`{"request_id":"bob-task-in-actx-r","task_id":"bob-task-in-actx","context_id":"alice-ctx-1","params":{"text":"x"}}`)
	refused("bob's E2A request", p.URL+"/v1/requests?agent=demo&wait=true", "bob-in-actx",
		`{"request_id":"bob-in-actx","context_id":"alice-ctx-1","params":{"text":"x"}}`)
	refused("bob's E2A request on the pool's path", p.URL+"/pools/demo/v1/requests", "bob-in-actx-pool",
		`{"request_id":"bob-in-actx-pool","context_id":"alice-ctx-1","params":{"text":"x"}}`)
	if status, b := post(p.URL+"/v1/requests?agent=demo&wait=true", bobKey, `{"task_id":"bob-own-task","params":{"text":"x","frames":1}}`); status != http.StatusOK {
		t.Fatalf("bob's own E2A task: %d %s", status, b)
	}
	refused("a later turn of bob's own task", p.URL+"/v1/requests", "bob-turn-in-actx",
		`{"request_id":"bob-turn-in-actx","task_id":"bob-own-task","context_id":"alice-ctx-1","params":{"text":"x"}}`)
	// An A2A message continuing bob's E2A task (its record names no
	// context; interrupted, so open) may not name alice's context either,
	// on either generation.
	if status, b := post(p.URL+"/v1/requests?agent=demo&wait=true", bobKey, `{"task_id":"bob-open-task","params":{"text":"x","ask":"input"}}`); status != http.StatusOK {
		t.Fatalf("bob's E2A task asking for input: %d %s", status, b)
	}
	v03 := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"taskId":"bob-open-task","contextId":"alice-ctx-1",` +
		`"kind":"message","role":"user","messageId":"m-bob-v03","parts":[{"kind":"text","text":"x"}]}}}`
	v1 := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":"bob-open-task","contextId":"alice-ctx-1",` +
		`"role":"ROLE_USER","messageId":"m-bob-v1","parts":[{"text":"x"}]}}}`
	for _, c := range []struct{ name, url, body string }{{"v0.3", p.URL + "/a2a", v03}, {"v1.0", p.URL + "/a2a/v1", v1}} {
		resp, b := testkit.Do(t, http.MethodPost, c.url, c.body, "X-Api-Key", bobKey, "A2A-Version", "1.0")
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "-32602") || strings.Contains(string(b), "alice") {
			t.Fatalf("A2A %s message continuing bob's E2A task in alice's context: %d %s; want -32602", c.name, resp.StatusCode, b)
		}
	}
	// The owner's is taken; and bob's E2A context is bob's.
	if status, b := post(p.URL+"/v1/requests?agent=demo&wait=true", aliceKey, `{"context_id":"alice-ctx-1","params":{"text":"x","frames":1}}`); status != http.StatusOK {
		t.Fatalf("alice's E2A request in her own context: %d %s", status, b)
	}
	if status, b := post(p.URL+"/v1/requests?agent=demo&wait=true", bobKey, `{"context_id":"bob-e2a-ctx","params":{"text":"x","frames":1}}`); status != http.StatusOK {
		t.Fatalf("bob's E2A request in a context nobody has: %d %s", status, b)
	}
	if b := a2aSend(aliceKey, "bob-e2a-ctx", "alice-in-bobs"); !strings.Contains(b, `"error"`) || !strings.Contains(b, "-32602") {
		t.Fatalf("alice's A2A message naming the context bob's E2A request uses: %s; want -32602", b)
	}
}

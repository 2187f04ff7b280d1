package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestA2ARetriedNewTaskClaimsNoContext: a message starting a task without
// a contextId gets one the adapter makes up, claimed for the caller
// (E2A_TASKS context.<id>) before the publish. Its retry (the same
// Idempotency-Key, a duplicate: nothing published, answered in the first
// call's context, TestA2ARetriedNewTaskKeepsItsContext) gets a context
// made up too, which no task is ever in and nobody is told of: its claim
// is taken back, and the first call's claim alone is left. v0.3
// message/send and v1.0 message:send.
func TestA2ARetriedNewTaskClaimsNoContext(t *testing.T) {
	const aliceKey = "ak_retry_claim_alice_0123"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey}, nil)
	p := startPipelineWith(t, ingress.WithAuth(auth))
	var want []string // the claims left: the first calls' contexts
	for _, c := range []struct {
		name, path, body string
		task             func(map[string]any) map[string]any
	}{
		{"v0.3 message/send", "/a2a",
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`,
			func(v map[string]any) map[string]any { r, _ := v["result"].(map[string]any); return r }},
		{"v1.0 message:send", "/a2a/v1/message:send",
			`{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]}}`,
			func(v map[string]any) map[string]any { r, _ := v["task"].(map[string]any); return r }},
	} {
		key := "retry-claim-" + c.name[:4]
		send := func() map[string]any {
			t.Helper()
			resp, b := testkit.Do(t, http.MethodPost, p.url+c.path, c.body, "X-Api-Key", aliceKey, "Idempotency-Key", key)
			var v map[string]any
			_ = json.Unmarshal(b, &v)
			task := c.task(v)
			if resp.StatusCode != http.StatusOK || task == nil {
				t.Fatalf("%s: %d %s", c.name, resp.StatusCode, b)
			}
			return task
		}
		first := send()
		tok, err := subjects.EncodeID(first["contextId"].(string))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ingress.KindContext+"."+tok)
		slices.Sort(want)
		claims := func(when string) {
			t.Helper()
			got := recordKeys(t, p.js, ingress.KindContext)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %s: context claims %v, want %v (the first calls' contexts)", c.name, when, got, want)
			}
		}
		claims("after the first call")
		for i := range 2 {
			if again := send(); again["id"] != first["id"] || again["contextId"] != first["contextId"] {
				t.Fatalf("%s: retry %d answered task %v in context %v, want %v in %v", c.name, i+1, again["id"], again["contextId"], first["id"], first["contextId"])
			}
			claims("after a retry")
		}
	}
}

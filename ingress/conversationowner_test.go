package ingress_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// ownerAgent answers every request and keeps its envelope by the token
// ("T-…") its params carry, for the test to read what the agent got.
type ownerAgent struct {
	mu   sync.Mutex
	envs map[string]*e2a.Envelope
}

var ownerToken = regexp.MustCompile(`T-[a-z0-9-]+`)

func (a *ownerAgent) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	b, _ := json.Marshal(env.Params)
	if tok := ownerToken.Find(b); tok != nil {
		a.mu.Lock()
		a.envs[string(tok)] = env.Clone()
		a.mu.Unlock()
	}
	if err := w.Chunk(e2a.DeltaText, "ok"); err != nil {
		return err
	}
	return w.Complete(map[string]any{"ok": true})
}

func (a *ownerAgent) env(t *testing.T, token string) *e2a.Envelope {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	env := a.envs[token]
	if env == nil {
		t.Fatalf("the agent got no request %s", token)
	}
	return env
}

// TestConversationOwner: the envelope of an admin's turn in another
// principal's ACP session or A2A context names that principal as the
// conversation's owner (provenance.details conversation_owner,
// e2a.Envelope.Owner), user_id staying the admin; a principal's turn in
// its own conversation names none. No client can name an owner: a value
// sent in a raw E2A envelope's provenance, A2A metadata or ACP _meta never
// reaches the agent as one, the admin's own included, so alice forging
// bob is alice's conversation, not bob's.
func TestConversationOwner(t *testing.T) {
	t.Parallel()
	const aliceKey, opsKey = "ak_owner_alice_0123456789", "ak_owner_ops_00123456789"
	auth, err := ingress.NewAuth(&ingress.AuthConfig{
		APIKeys: []ingress.Credential{{Principal: "alice", Secret: aliceKey}, {Principal: "bob", Secret: "ak_owner_bob_000123456789"},
			{Principal: "ops", Secret: opsKey}},
		Roles: map[string][]string{"ops": {"admin"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	rec := &ownerAgent{envs: map[string]*e2a.Envelope{}}
	p.Pool("rec", rec)
	call := func(key, path, body string) []byte {
		t.Helper()
		resp, b := testkit.Do(t, http.MethodPost, p.URL+path, body, "Content-Type", "application/json", "X-Api-Key", key)
		if resp.StatusCode/100 != 2 || rpcErrorOf(b) {
			t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, b)
		}
		return b
	}
	result := func(b []byte, key string) string {
		var m struct {
			Result map[string]any `json:"result"`
		}
		_ = json.Unmarshal(b, &m)
		s, _ := m.Result[key].(string)
		return s
	}
	rpc := func(method, params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	}
	prompt := func(session, text, meta string) string {
		return rpc("session/prompt", `{"sessionId":"`+session+`","prompt":[{"type":"text","text":"`+text+`"}]`+meta+`}`)
	}
	message := func(contextID, text, meta string) string {
		ctx := ""
		if contextID != "" {
			ctx = `"contextId":"` + contextID + `",`
		}
		return rpc("message/send", `{"message":{"kind":"message","role":"user","messageId":"`+text+`",`+ctx+meta+
			`"parts":[{"kind":"text","text":"`+text+`"}]}}`)
	}
	const forged = `"conversation_owner":"bob"`

	session := result(call(aliceKey, "/acp?agent=rec", rpc("session/new", `{"cwd":"/tmp","mcpServers":[]}`)), "sessionId")
	if session == "" {
		t.Fatal("alice's session/new named no session")
	}
	call(aliceKey, "/acp?agent=rec", prompt(session, "T-alice-prompt", ""))
	call(opsKey, "/acp?agent=rec", prompt(session, "T-ops-prompt", ""))
	call(aliceKey, "/acp?agent=rec", prompt(session, "T-forged-acp", `,"_meta":{`+forged+`}`))
	contextID := result(call(aliceKey, "/a2a?agent=rec", message("", "T-alice-a2a", "")), "contextId")
	if contextID == "" {
		t.Fatal("alice's message/send named no context")
	}
	call(opsKey, "/a2a?agent=rec", message(contextID, "T-ops-a2a", ""))
	call(aliceKey, "/a2a?agent=rec", message(contextID, "T-forged-a2a", `"metadata":{`+forged+`},`))
	raw := func(id string) string {
		return `{"request_id":"` + id + `","session_id":"shared","params":{"text":"` + id + `"},` +
			`"provenance":{"source_protocol":"e2a","details":{` + forged + `}}}`
	}
	call(aliceKey, "/v1/requests?agent=rec&wait=true", raw("T-forged-e2a"))
	call(opsKey, "/v1/requests?agent=rec&wait=true", raw("T-forged-e2a-admin"))

	for _, c := range []struct{ token, user, owner string }{
		{"T-alice-prompt", "alice", ""},
		{"T-ops-prompt", "ops", "alice"},
		{"T-forged-acp", "alice", ""},
		{"T-alice-a2a", "alice", ""},
		{"T-ops-a2a", "ops", "alice"},
		{"T-forged-a2a", "alice", ""},
		{"T-forged-e2a", "alice", ""},
		{"T-forged-e2a-admin", "ops", ""},
	} {
		env := rec.env(t, c.token)
		detail, set := env.Provenance.Details[e2a.DetailConversationOwner]
		if env.UserID != c.user || (c.owner == "") == set || (set && detail != c.owner) ||
			env.Owner() != cmp.Or(c.owner, c.user) {
			t.Errorf("%s: user_id %q, conversation_owner %v (set %v), Owner %q; want user_id %q, owner %q",
				c.token, env.UserID, detail, set, env.Owner(), c.user, cmp.Or(c.owner, c.user))
		}
	}
}

// rpcErrorOf reports whether b is a JSON-RPC error answer.
func rpcErrorOf(b []byte) bool {
	var m struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(b, &m) == nil && len(m.Error) > 0 && string(m.Error) != "null"
}

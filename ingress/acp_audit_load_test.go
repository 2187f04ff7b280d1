package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestACPAuditLoadKeepsSettings: a principal of the audit role (who may
// read every session, AUTH.md) loads another's session as every ACP
// client sends session/load, with its own cwd and mcpServers (both
// required by the schema's LoadSessionRequest): it gets the replay and
// LoadSessionResponse, and the session keeps its owner's settings (the
// owner's next prompt runs in the owner's cwd). The load was -32002: a
// load with settings asked for write access, so "session/load without new
// settings" was a load no conforming client can send.
func TestACPAuditLoadKeepsSettings(t *testing.T) {
	const alice, ops = "ak_alice_0123456789abcdef", "ak_ops_0123456789abcdefghi"
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t,
		map[string]string{"alice": alice, "ops": ops}, map[string][]string{"ops": {"audit"}}))))
	// The agent says the cwd its prompt runs in.
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "cwd="+env.ParamString("cwd")); err != nil {
			return err
		}
		return w.Complete(map[string]any{})
	}))
	post := func(key, body string) []rpcMsg {
		req, _ := http.NewRequest("POST", p.URL+"/acp", strings.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return ndjsonMsgs(t, resp.Body)
	}
	said := func(msgs []rpcMsg) string {
		var b strings.Builder
		for _, m := range msgs {
			if m.Params.Update["sessionUpdate"] == "agent_message_chunk" {
				c, _ := m.Params.Update["content"].(map[string]any)
				s, _ := c["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	created := post(alice, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/home/alice","mcpServers":[]}}`)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if len(created) != 1 || json.Unmarshal(created[0].Result, &res) != nil || res.SessionID == "" {
		t.Fatalf("session/new: %+v", created)
	}
	prompt := `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + res.SessionID + `","prompt":[{"type":"text","text":"where"}]}}`
	if got := said(post(alice, prompt)); got != "cwd=/home/alice" {
		t.Fatalf("alice's turn said %q", got)
	}
	load := post(ops, `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"`+res.SessionID+`","cwd":"/home/ops","mcpServers":[]}}`)
	if last := load[len(load)-1]; last.Error != nil || string(last.Result) != "{}" || said(load) != "cwd=/home/alice" {
		t.Errorf("the auditor's session/load (with cwd and mcpServers, as the schema requires): last %+v %s, replayed %q; want the replay and {}",
			last.Error, last.Result, said(load))
	}
	if got := said(post(alice, prompt)); got != "cwd=/home/alice" {
		t.Errorf("after the auditor's load alice's turn ran in %q: the auditor's settings replaced the owner's", got)
	}
	// Nobody else's load changes anything either; the owner's own does.
	if got := post(alice, `{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"`+res.SessionID+`","cwd":"/srv/alice","mcpServers":[]}}`); got[len(got)-1].Error != nil {
		t.Fatalf("alice's load: %+v", got[len(got)-1].Error)
	}
	if got := said(post(alice, prompt)); got != "cwd=/srv/alice" {
		t.Errorf("after alice's own load her turn ran in %q, want /srv/alice", got)
	}
}

package ingress_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestACPExtensionCallOfAnothersSession: an extension method ("_vendor/x")
// naming a session (params.sessionId, or the spec's session_id) is a
// call into that session, checked as session/prompt checks its session:
// bob naming alice's session, or a session that does not exist, is
// answered ResourceNotFound (-32002), as a notification too, and nothing
// is published for an agent. The envelope it published carried alice's
// session id under bob's user_id, for her session's agent to act on.
// alice's own session, an admin (ops) naming hers, and a call naming no
// session still reach the agent.
func TestACPExtensionCallOfAnothersSession(t *testing.T) {
	const alice, bob, ops = "ak_ax_alice_0123456789", "ak_ax_bob_00123456789", "ak_ax_ops_00123456789"
	p := startPipelineWith(t, ingress.WithAuth(pipetest.KeyAuth(t,
		map[string]string{"alice": alice, "bob": bob, "ops": ops}, map[string][]string{"ops": {"admin"}})))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := acpNewSession(t, p.url, alice)
	requests, err := p.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	published := func() uint64 {
		t.Helper()
		info, err := requests.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	ext := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"_vendor/echo","params":` + params + `}`
	}
	call := func(key, body string) rpcMsg {
		t.Helper()
		b, _ := io.ReadAll(acpPost(t, p.url, key, body).Body)
		return decodeMsg(t, b)
	}
	before := published()
	for name, body := range map[string]string{
		"sessionId of alice's":  ext("1", `{"sessionId":"`+sid+`","text":"mine now","frames":1}`),
		"session_id of alice's": ext("2", `{"session_id":"`+sid+`","text":"mine now","frames":1}`),
		"an unknown sessionId":  ext("3", `{"sessionId":"no-such-session","text":"x","frames":1}`),
	} {
		if m := call(bob, body); m.Error == nil || m.Error.Code != jsonrpc.CodeACPResourceNotFound {
			t.Errorf("bob's extension call naming %s: %+v %s, want %d (as session/prompt answers)",
				name, m.Error, m.Result, jsonrpc.CodeACPResourceNotFound)
		}
	}
	resp := acpPost(t, p.url, bob, `{"jsonrpc":"2.0","method":"_vendor/echo","params":{"sessionId":"`+sid+`","text":"x","frames":1}}`)
	if _, _ = io.ReadAll(resp.Body); resp.StatusCode != http.StatusNoContent {
		t.Errorf("bob's extension notification naming alice's session: %d, want 204", resp.StatusCode)
	}
	if n := published() - before; n != 0 {
		t.Errorf("bob's refused extension calls published %d requests, want none", n)
	}
	for who, key := range map[string]string{"alice": alice, "ops (admin)": ops} {
		if m := call(key, ext("4", `{"sessionId":"`+sid+`","text":"x","frames":1}`)); m.Error != nil || len(m.Result) == 0 {
			t.Errorf("%s's extension call naming alice's session: %+v %s, want the agent's answer", who, m.Error, m.Result)
		}
	}
	if m := call(bob, ext("5", `{"text":"x","frames":1}`)); m.Error != nil || len(m.Result) == 0 {
		t.Errorf("bob's extension call naming no session: %+v %s, want the agent's answer", m.Error, m.Result)
	}
}

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestACPBridgeOpenAI: `e2a acp --openai URL --model M`, spawned as an
// editor spawns it, answers the editor's prompts (acp-go-sdk's client)
// with the model, and a session's second prompt sends the first turn
// upstream (the prompt and the model's reply): a stateless model server
// holds the editor's conversation from the pipeline's history. The API
// key reaches the model as a bearer token and never the output.
func TestACPBridgeOpenAI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const key = "sk-test-acp-5e6f7a8b9c0d"
	upstream, calls := openAIFixture(t, key)
	p := startACPWith(t, ctx, []string{"--openai", upstream.URL + "/v1", "--model", "test-model"},
		"E2A_NATS_PORT=0", "E2A_STORE_DIR="+t.TempDir(), "E2A_REQUESTS_MAX_BYTES=67108864", "E2A_LOG_LEVEL=info", "E2A_UPSTREAM_API_KEY="+key)
	_, sess := p.open(t, ctx)
	prompt := func(text string) (reply string, call chatCall) {
		t.Helper()
		reply = acpPrompt(t, ctx, p, sess, text)
		select {
		case call = <-calls:
		case <-ctx.Done():
			t.Fatal("the model was not called")
		}
		return reply, call
	}
	reply, first := prompt("first question")
	if reply != fixtureReply || first.Auth != "Bearer "+key || !strings.Contains(first.Body, "first question") {
		t.Errorf("first turn: reply %q, the model's call %+v", reply, first)
	}
	reply, second := prompt("second question")
	if reply != fixtureReply {
		t.Errorf("second turn: reply %q", reply)
	}
	for _, want := range []string{"first question", fixtureReply, "second question"} {
		if !strings.Contains(second.Body, want) {
			t.Errorf("the second call's conversation lacks %q: %s", want, second.Body)
		}
	}
	p.stop(t)
	if out := p.stderr.String(); strings.Contains(out, key) || !strings.Contains(out, `"pool":"agent"`) {
		t.Errorf("stderr holds the key or names no pool agent:\n%s", out)
	}
}

// acpPrompt sends text as a prompt of session and returns the agent's
// message chunks' text, failing t unless the turn ends end_turn.
func acpPrompt(t *testing.T, ctx context.Context, p *acpProc, session acp.SessionId, text string) string {
	t.Helper()
	res, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt %q: %+v %v", text, res, err)
	}
	var b strings.Builder
	for _, u := range p.rec.Take(session) {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			b.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return b.String()
}

// TestACPForwards: `e2a acp --pool P` with E2A_NATS_URL runs no pipeline
// or agent of its own: the editor's prompts go to that pipeline's pool
// (here `e2a dev --openai`'s bridged pool), whose agent answers them.
func TestACPForwards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const key = "sk-test-forward-1a2b3c"
	upstream, calls := openAIFixture(t, key)
	dev := startDev(t, []string{"E2A_UPSTREAM_API_KEY=" + key}, "--openai", upstream.URL+"/v1", "--model", "test-model")
	waitPoolLive(t, dev.base, "agent")
	p := startACPWith(t, ctx, []string{"--pool", "agent"}, "E2A_NATS_URL="+dev.nats, "E2A_LOG_LEVEL=info")
	_, sess := p.open(t, ctx)
	if reply := acpPrompt(t, ctx, p, sess, "forwarded question"); reply != fixtureReply {
		t.Errorf("reply %q, want the model's %q", reply, fixtureReply)
	}
	if call := testkit.Receive(t, calls, 30*time.Second, "the model was not called"); !strings.Contains(call.Body, "forwarded question") {
		t.Errorf("the model's call: %s", call.Body)
	}
	p.stop(t)
	if out := p.stderr.String(); !strings.Contains(out, `"embedded":false`) || !strings.Contains(out, `"pool":"agent"`) {
		t.Errorf("stderr does not say it forwards to pool agent:\n%s", out)
	}
}

// TestACPBridgeArgs: `e2a acp`'s upstream flags are checked before it
// starts: a bridge flag without an upstream, or an upstream with
// E2A_NATS_URL (it serves prompts in this process's embedded pipeline
// only), are usage errors (exit 2, with the help).
func TestACPBridgeArgs(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"E2A_NATS_URL="}, []string{"acp", "--model", "m"}, "--model goes with an upstream"},
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1"}, []string{"acp", "--http", "http://127.0.0.1:1/"}, "without E2A_NATS_URL"},
	} {
		code, out, errOut := runBin(t, c.env, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Usage: e2a acp") {
			t.Errorf("%v %v: exit %d, stdout %q, stderr:\n%s", c.env, c.args, code, out, errOut)
		}
	}
}

// TestACPForwardUnknownPool: `e2a acp --pool demoo` (a typo) forwarding
// to a pipeline whose pool demoo no worker ever started on answers the
// prompt with an error naming the pool, as e2a serve's /acp does
// (unknown_agent), instead of a prompt that waits for ever.
func TestACPForwardUnknownPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, _ := natstest.RunServer(t)
	p := startACPWith(t, ctx, []string{"--pool", "demoo"}, "E2A_NATS_URL="+srv.ClientURL(), "E2A_LOG_LEVEL=info")
	_, sess := p.open(t, ctx)
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	res, err := p.conn.Prompt(pctx, acp.PromptRequest{SessionId: sess, Prompt: []acp.ContentBlock{acp.TextBlock("hello")}})
	if err == nil || !strings.Contains(err.Error(), "unknown agent pool") || !strings.Contains(err.Error(), "demoo") {
		t.Fatalf("prompt to an unknown pool: %+v %v, want an error naming it", res, err)
	}
	p.stop(t)
}

package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// acpHTTP is a pipeline whose default pool "demo" is served by h, spoken to
// over POST /acp.
type acpHTTP struct {
	t *testing.T
	p *pipetest.Pipeline
}

func startACPHTTP(t *testing.T, h agent.Handler) *acpHTTP {
	t.Helper()
	p := pipetest.Start(t)
	p.Pool("demo", h)
	return &acpHTTP{t: t, p: p}
}

func (z *acpHTTP) post(ctx context.Context, body string) []rpcMsg {
	z.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", z.p.URL+"/acp", strings.NewReader(body))
	if err != nil {
		z.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		z.t.Errorf("POST /acp: %v", err)
		return nil
	}
	defer resp.Body.Close()
	return ndjsonMsgs(z.t, resp.Body)
}

func (z *acpHTTP) session(ctx context.Context) string {
	z.t.Helper()
	msgs := z.post(ctx, `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var res acp.NewSessionResponse
	if len(msgs) != 1 || msgs[0].Error != nil || json.Unmarshal(msgs[0].Result, &res) != nil || res.SessionId == "" {
		z.t.Fatalf("session/new: %+v", msgs)
	}
	return string(res.SessionId)
}

func acpCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// validStop reports whether s is one of ACP's five stop reasons.
func validStop(s acp.StopReason) bool {
	switch s {
	case acp.StopReasonEndTurn, acp.StopReasonMaxTokens, acp.StopReasonMaxTurnRequests, acp.StopReasonRefusal, acp.StopReasonCancelled:
		return true
	}
	return false
}

// TestACPPromptResultStopReasonIsACPs: an agent that ends its turn with
// an acp.prompt_result frame (an ACP peer behind the HTTP agent, say)
// whose stop_reason is empty, missing, or a model API's own ("length")
// ends session/prompt with one of ACP's five stopReasons (docs/protocols.md:
// "always one of ACP's five"; PromptResponse's stopReason is a required
// enum), as an e2a.complete result's does; the frame's was copied as it
// came.
func TestACPPromptResultStopReasonIsACPs(t *testing.T) {
	bodies := map[string]map[string]any{
		"empty":   {"stop_reason": ""},
		"missing": {"usage": map[string]any{"inputTokens": 3, "outputTokens": 5}},
		"length":  {"stop_reason": "length"},
	}
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		blocks, _ := env.Params["prompt"].([]any)
		b, _ := blocks[0].(map[string]any)
		text, _ := b["text"].(string)
		if err := w.Chunk(e2a.DeltaText, "hi"); err != nil {
			return err
		}
		return w.Write(e2a.KindACPPromptRes, e2a.StatusSucceeded, bodies[text], true)
	})
	z := startACPHTTP(t, h)
	ctx := acpCtx(t)
	sid := z.session(ctx)
	for _, name := range []string{"empty", "missing", "length"} {
		msgs := z.post(ctx, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"`+name+`"}]}}`)
		if len(msgs) == 0 {
			t.Fatalf("%s: no answer", name)
		}
		last := msgs[len(msgs)-1]
		var res acp.PromptResponse
		if last.Error != nil || json.Unmarshal(last.Result, &res) != nil || !validStop(res.StopReason) {
			t.Errorf("agent's acp.prompt_result %v: session/prompt answered %s (error %+v); want a stopReason among ACP's five",
				bodies[name], last.Result, last.Error)
		}
	}
}

// TestACPStalledLoadReleasesItsSlot: a session/load whose client stops
// reading (an editor frozen, a dead peer whose TCP stays open) is
// disconnected as a slow client, as every egress stream is after its write
// timeout (10 s by default; 1 s here), giving back its stream slot. The
// load's own writer had no write deadline: the replay blocked for ever in
// Write, and the principal's stream slot with it, so every later prompt
// was 429.
func TestACPStalledLoadReleasesItsSlot(t *testing.T) {
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		blocks, _ := env.Params["prompt"].([]any)
		b, _ := blocks[0].(map[string]any)
		if b["text"] == "big" {
			part := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB
			for range 48 {
				if err := w.Chunk(e2a.DeltaText, part); err != nil {
					return err
				}
			}
		}
		return w.Complete(map[string]any{"text": "ok"})
	})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithStreamLimiter(ingress.NewStreamLimiter(1))),
		pipetest.WithEgress(egress.WithWriteTimeout(time.Second)))
	p.Pool("demo", h)
	z := &acpHTTP{t: t, p: p}
	// Not acpCtx's 30 s: the 12 MiB answer, under -race beside other
	// packages (load 20), took most of them, and a probe in flight then
	// failed "context deadline exceeded" (a local CI run, 31 s).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sid := z.session(ctx)
	if msgs := z.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"big"}]}}`); len(msgs) == 0 || msgs[len(msgs)-1].Error != nil {
		t.Fatalf("big prompt: %d messages", len(msgs))
	}
	// A client that sends session/load and never reads its answer.
	u, _ := url.Parse(p.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"` + sid + `","cwd":"/w","mcpServers":[]}}`
	fmt.Fprintf(conn, "POST /acp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)
	probe := func() int {
		req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/acp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"`+z.session(ctx)+`"}}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	// The load answers (its status line: it holds the slot), then its
	// client reads no more.
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("session/load: %q %v", line, err)
	}
	testkit.Eventually(t, 20*time.Second, "the stalled load disconnected and its stream slot given back", func() bool { return probe() == http.StatusOK })
}

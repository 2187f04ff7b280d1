package ingress_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestACPPromptCapabilitiesFollowPoolModes: pool "vision" publishes its
// info with input modes text/plain and image/png (as `e2a agent
// --input-modes` does); pool "plain" publishes none. Over stdio with
// acp-go-sdk's client (a front door whose default pool is each), and at
// each pool's /pools/<pool>/acp, initialize says promptCapabilities.image
// true for vision and false for plain (audio false for both). A prompt
// with an image to plain is -32602 naming the block and the pool's modes,
// and nothing is published; the same prompt to vision reaches its agent
// with the image block as sent.
func TestACPPromptCapabilitiesFollowPoolModes(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("vision")))
	publishPoolInfo(t, p.NC, bridge.PoolInfo{Pool: "vision", Streaming: true, InputModes: []string{"text/plain", "image/png"}})
	got := make(chan *e2a.Envelope, 4)
	p.Pool("vision", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		got <- env
		return agent.Reply(w, "seen")
	}))
	p.Pool("plain", demo.New())
	reg := prometheus.NewRegistry()
	plainFront := pipetest.ServeFront(t, p.NC, []egress.Option{egress.WithRegisterer(reg)},
		ingress.WithRegisterer(reg), ingress.WithDefaultPool("plain"))

	for _, c := range []struct {
		pool  string
		image bool
	}{{"vision", true}, {"plain", false}} {
		m := (&pipeline{url: p.URL}).post(t, "/pools/"+c.pool+"/acp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		b, _ := io.ReadAll(m.Body)
		want := `"promptCapabilities":{"audio":false,"embeddedContext":true,"image":` + map[bool]string{true: "true", false: "false"}[c.image] + `}`
		if !strings.Contains(string(b), want) {
			t.Errorf("initialize at /pools/%s/acp: %s; want %s", c.pool, b, want)
		}
	}

	stdio := func(srv *ingress.Server) *acptest.Session {
		return acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
			return ingress.ServeACPStdio(ctx, in, out, srv)
		})
	}
	vision, plain := stdio(p.Ingress), stdio(plainFront.Ingress)
	for _, c := range []struct {
		name  string
		s     *acptest.Session
		image bool
	}{{"vision", vision, true}, {"plain", plain, false}} {
		ini, err := c.s.Conn.Initialize(c.s.Ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
		if err != nil {
			t.Fatal(err)
		}
		if pc := ini.AgentCapabilities.PromptCapabilities; pc.Image != c.image || pc.Audio || !pc.EmbeddedContext {
			t.Errorf("initialize of pool %s over stdio: %+v; want image %v, audio false, embeddedContext true", c.name, pc, c.image)
		}
	}

	image := []acp.ContentBlock{acp.TextBlock("what is this?"), acp.ImageBlock("aGVsbG8=", "image/png")}
	before := requestsStored(t, &pipeline{js: p.JS})
	_, err := plain.Conn.Prompt(plain.Ctx, acp.PromptRequest{SessionId: plain.ID, Prompt: image})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, "prompt[1]") ||
		!strings.Contains(re.Message, `"plain"`) || !strings.Contains(re.Message, "text/plain") {
		t.Fatalf("an image to pool plain: %v; want -32602 naming prompt[1], the pool and its input modes", err)
	}
	if n := requestsStored(t, &pipeline{js: p.JS}); n != before {
		t.Fatalf("a refused prompt was published (%d requests, %d before)", n, before)
	}

	res, err := vision.Conn.Prompt(vision.Ctx, acp.PromptRequest{SessionId: vision.ID, Prompt: image})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("an image to pool vision: %+v %v", res, err)
	}
	env := testkit.Receive(t, got, 10*time.Second, "the vision agent's request")
	blocks, _ := env.Params["prompt"].([]any)
	img, _ := func() (map[string]any, bool) {
		if len(blocks) != 2 {
			return nil, false
		}
		m, ok := blocks[1].(map[string]any)
		return m, ok
	}()
	if img["type"] != "image" || img["data"] != "aGVsbG8=" || img["mimeType"] != "image/png" {
		t.Fatalf("the vision agent got prompt %v; want the text and the image block as sent", env.Params["prompt"])
	}
}

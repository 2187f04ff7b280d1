package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
)

// whoAmI answers with its pool's name: which pool served a request.
func whoAmI(pool string) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "pool "+pool); err != nil {
			return err
		}
		return w.Complete(map[string]any{"content": "pool " + pool})
	})
}

// TestPoolEndpoints: a pool's card at /pools/<pool>/.well-known/agent-card.json
// points at the pool's own endpoints; the a2a-go/v2 client (v1.0) and the
// a2a-go v0.3 client given that card reach that pool and no other, with
// the name, description and skills a bridge published; the pipeline's card
// lists the pools; an unknown pool is 404.
func TestPoolEndpoints(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t)
	p.Pool("demo", whoAmI("demo"))
	p.Pool("echo", whoAmI("echo"))
	p.Pool("plain", whoAmI("plain"))
	p.Pool(normalizer.WorkflowPool, whoAmI(normalizer.WorkflowPool))
	ctx := context.Background()
	conv, err := bridge.OpenConversations(ctx, p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(ctx, bridge.PoolInfo{Pool: "echo", Kind: "a2a", Upstream: "http://upstream.example",
		Name: "Echo Agent", Description: "Echoes.", Skills: []map[string]any{{"id": "echo", "name": "Echo", "description": "echo", "tags": []string{"echo"}}}}); err != nil {
		t.Fatal(err)
	}

	card, err := agentcard.DefaultResolver.Resolve(ctx, p.URL+"/pools/echo")
	if err != nil {
		t.Fatalf("resolve the pool's card: %v", err)
	}
	if card.Name != "Echo Agent" || card.Description != "Echoes." || len(card.Skills) != 1 || card.Skills[0].ID != "echo" {
		t.Errorf("card = %q %q %+v, want the bridge's name, description and skills", card.Name, card.Description, card.Skills)
	}
	for _, i := range card.SupportedInterfaces {
		if !strings.HasPrefix(i.URL, p.URL+"/pools/echo/") {
			t.Errorf("interface %s %s is not under the pool's path", i.ProtocolBinding, i.URL)
		}
	}
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
		if err != nil {
			t.Fatalf("%s: %v", binding, err)
		}
		if got := v1AnswerText(res); got != "pool echo" {
			t.Errorf("%s: answer %q, want the echo pool's", binding, got)
		}
		_ = c.Destroy()
	}

	// The v0.3 client, from the v0.3 members of the same card.
	card03, err := agentcard03.DefaultResolver.Resolve(ctx, p.URL+"/pools/plain")
	if err != nil {
		t.Fatal(err)
	}
	if card03.URL != p.URL+"/pools/plain/a2a" || card03.Name != "E2A Pipeline: plain" {
		t.Errorf("v0.3 card url %q name %q", card03.URL, card03.Name)
	}
	c03, err := a2aclient03.NewFromCard(ctx, card03)
	if err != nil {
		t.Fatal(err)
	}
	res03, err := c03.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "hi"})})
	if err != nil {
		t.Fatal(err)
	}
	var got03 string
	switch r := res03.(type) {
	case *a2a03.Message:
		got03 = partsText03(r.Parts)
	case *a2a03.Task:
		for _, a := range r.Artifacts {
			got03 += partsText03(a.Parts)
		}
	}
	if got03 != "pool plain" {
		t.Errorf("v0.3 answer %q, want the plain pool's", got03)
	}

	// E2A under the pool's path goes to the pool (a ?agent= naming another
	// is refused: TestPoolPathAgentConflict).
	resp, err := http.Post(p.URL+"/pools/echo/v1/requests?wait=true", "application/json", strings.NewReader(`{"params":{"text":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Frames []e2a.Response `json:"frames"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if n := len(body.Frames); n == 0 || !strings.Contains(string(body.Frames[n-1].Body), "pool echo") {
		t.Errorf("E2A under /pools/echo: %d frames %v", n, body.Frames)
	}

	// The pipeline's card lists the pools and their cards.
	main, err := agentcard.DefaultResolver.Resolve(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, s := range main.Skills {
		listed[s.ID] = true
	}
	for _, want := range []string{"pool:demo", "pool:echo", "pool:plain"} {
		if !listed[want] {
			t.Errorf("the pipeline's card does not list %s (skills %v)", want, listed)
		}
	}
	// The workflow pool takes A2E workflow executions only (its A2A door
	// refuses every message): it is no A2A agent, listed or with a card.
	if listed["pool:"+normalizer.WorkflowPool] {
		t.Errorf("the pipeline's card lists the workflow pool as an A2A agent (skills %v)", listed)
	}

	for _, path := range []string{"/pools/nopool/.well-known/agent-card.json", "/pools/" + normalizer.WorkflowPool + "/.well-known/agent-card.json", "/pools/echo/pools/demo/a2a/v1", "/pools/bad.name/v1/requests"} {
		resp, err := http.Get(p.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, resp.StatusCode)
		}
	}
}

// v1AnswerText is the text of a SendMessage answer: a message's, or a
// task's artifacts'.
func v1AnswerText(res a2a.SendMessageResult) string {
	switch r := res.(type) {
	case *a2a.Message:
		return v1Text(r.Parts)
	case *a2a.Task:
		var s string
		for _, a := range r.Artifacts {
			s += v1Text(a.Parts)
		}
		return s
	}
	return ""
}

func partsText03(parts a2a03.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(a2a03.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

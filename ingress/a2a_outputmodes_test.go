package ingress_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// TestA2ATextOnlyOutputModes: a client accepting only text/plain gets no
// DataPart (the demo agent's tool call and response are dropped), in
// message/send and message/stream.
func TestA2ATextOnlyOutputModes(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{AcceptedOutputModes: []string{"text/plain"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	noData := func(where string, parts a2a.ContentParts) {
		for _, p := range parts {
			if _, ok := p.(a2a.DataPart); ok {
				t.Fatalf("%s: DataPart for a text/plain client: %+v", where, p)
			}
		}
	}
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	for _, m := range task.History {
		noData("history", m.Parts)
	}
	var reply string
	for _, a := range task.Artifacts {
		noData("artifact", a.Parts)
		reply += textOf(a.Parts)
	}
	if reply == "" {
		t.Fatalf("no reply text: %+v", task)
	}
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}) {
		if err != nil {
			t.Fatal(err)
		}
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			noData("artifact-update", au.Artifact.Parts)
		}
	}
}

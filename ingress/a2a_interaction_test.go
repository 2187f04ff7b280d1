package ingress_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// streamEvents runs message/stream with msg through a client whose HTTP
// requests carry hdr.
func streamEvents(t *testing.T, p *pipeline, msg *a2a.Message, hdr http.Header) []a2a.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: headerTransport{hdr}}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	var evs []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// kinds counts thought parts, function_call/function_response DataParts
// and the artifacts they came in.
func kinds(t *testing.T, evs []a2a.Event) (thoughts, tools int, toolArts, textArts map[a2a.ArtifactID]bool) {
	t.Helper()
	toolArts, textArts = map[a2a.ArtifactID]bool{}, map[a2a.ArtifactID]bool{}
	for _, ev := range evs {
		au, ok := ev.(*a2a.TaskArtifactUpdateEvent)
		if !ok {
			continue
		}
		for _, p := range au.Artifact.Parts {
			switch pt := p.(type) {
			case a2a.TextPart:
				if pt.Metadata["thought"] == true {
					thoughts++
				} else {
					textArts[au.Artifact.ID] = true
				}
			case a2a.DataPart:
				if typ := pt.Metadata["type"]; typ == "function_call" || typ == "function_response" {
					tools++
					toolArts[au.Artifact.ID] = true
					if _, ok := pt.Data["args"]; ok {
						if _, ok := pt.Data["args"].(string); !ok {
							t.Fatalf("args not a JSON string: %v", pt.Data)
						}
					}
				}
			}
		}
		if _, ok := au.Metadata["llm_response_id"]; !ok && len(au.Artifact.Parts) > 0 {
			t.Fatalf("artifact-update without llm_response_id: %+v", au)
		}
	}
	return
}

// TestA2AInteractionExtension: a basic A2A client (no
// interaction_spec_version, no X-A2A-Extensions) gets no thought parts and
// no tool DataParts; one that declares the trpc extension (either way)
// gets them, tool events and text in artifacts of their own, each event
// with llm_response_id and args as a JSON string.
func TestA2AInteractionExtension(t *testing.T) {
	p := startPipeline(t)
	th, tools, _, text := kinds(t, streamEvents(t, p, a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "basic"}), nil))
	if th != 0 || tools != 0 || len(text) == 0 {
		t.Fatalf("basic client: %d thoughts, %d tool parts, text artifacts %v", th, tools, text)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "spec"})
	msg.Metadata = map[string]any{"interaction_spec_version": "0.1"}
	for name, evs := range map[string][]a2a.Event{
		"metadata": streamEvents(t, p, msg, nil),
		"header":   streamEvents(t, p, a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "spec"}), http.Header{"X-A2A-Extensions": {"trpc-a2a-version"}}),
	} {
		th, tools, toolArts, textArts := kinds(t, evs)
		if th == 0 || tools != 2 {
			t.Fatalf("%s: %d thoughts, %d tool parts", name, th, tools)
		}
		if len(toolArts) != 2 || len(textArts) != 1 {
			t.Fatalf("%s: tool artifacts %v, text artifacts %v", name, toolArts, textArts)
		}
		for id := range toolArts {
			if textArts[id] {
				t.Fatalf("%s: tool event and text share artifact %s", name, id)
			}
		}
	}
}

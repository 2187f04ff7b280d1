package openai_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestBridgeFixtures: each fixture's stream, through the bridge in a real
// pipeline, is stored as the frames it means (read back from the E2A SSE
// stream): text and reasoning deltas, one function_call tool delta per
// call with its assembled arguments (interleaved fragments included), the
// final e2a.complete with content, finish_reason, usage and model, or the
// mid-stream error as e2a.error upstream_unavailable; every frame carries
// the completion's id as llm_response_id. The model server got one call
// each, with stream and include_usage set and the user's text.
func TestBridgeFixtures(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	n := 0
	for name, w := range fixtures {
		t.Run(name, func(t *testing.T) {
			n++
			a := read(t, ask(t, p, "", "fix-"+name, "fixture:"+name, nil))
			calls := srv.recordedCalls()
			if len(calls) != n {
				t.Fatalf("%d upstream calls, want %d (no retry after a frame)", len(calls), n)
			}
			got := calls[n-1].Body
			if got.Model != "test-model" || !got.Stream || got.StreamOptions["include_usage"] != true ||
				fmt.Sprint(got.roles()) != "[user: fixture:"+name+"]" {
				t.Fatalf("upstream request %+v", got)
			}
			wantText, wantReasoning := w.content+w.refusal, w.reasoning // a refusal is the answer's text
			if w.thinkTags {
				wantReasoning, wantText = splitThink(w.content)
			}
			wantCalls := w.calls
			if w.bridgeCalls != nil {
				wantCalls = w.bridgeCalls
			}
			if a.text != wantText || a.reasoning != wantReasoning || !equalCalls(a.calls, wantCalls) {
				t.Errorf("text %q reasoning %q calls %+v; want %q, %q, %+v", a.text, a.reasoning, a.calls,
					wantText, wantReasoning, wantCalls)
			}
			if len(a.responseIDs) != 1 || a.responseIDs[w.id] == 0 {
				t.Errorf("llm_response_id on the frames: %v, want every frame %q", a.responseIDs, w.id)
			}
			if w.errCode != "" {
				if a.final.ResponseKind != e2a.KindError || a.errBody.Code != w.errCode || !a.errBody.Retryable {
					t.Fatalf("final %s %+v, want e2a.error %s retryable", a.final.ResponseKind, a.errBody, w.errCode)
				}
				return
			}
			r := a.result
			// A server naming no model: the result names the one asked for.
			if a.final.ResponseKind != e2a.KindComplete || r["content"] != wantText || r["finish_reason"] != w.finish ||
				r["model"] != cmp.Or(w.model, "test-model") {
				t.Fatalf("final %s %v", a.final.ResponseKind, r)
			}
			if refusal, _ := r["refusal"].(string); refusal != w.refusal {
				t.Errorf("result's refusal %q, want %q", refusal, w.refusal)
			}
			usage, _ := r["usage"].(map[string]any)
			if total, _ := usage["total_tokens"].(json.Number); (w.totalTokens == 0) != (usage == nil) ||
				(usage != nil && total.String() != fmt.Sprint(w.totalTokens)) {
				t.Errorf("usage %v, want total_tokens %d", r["usage"], w.totalTokens)
			}
		})
	}
}

// TestBridgeA2AV1: an A2A v1.0 client (a2a-go/v2) declaring the trpc
// interaction spec sees, through the bridge, the model's text in an
// artifact named after the completion's id, and the parallel tool calls
// as function_call DataParts with their arguments.
func TestBridgeA2AV1(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{
		PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	stream := func(text string) (artifacts map[a2a.ArtifactID][]a2a.Part, last *a2a.TaskStatusUpdateEvent) {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.Metadata = map[string]any{"interaction_spec_version": "0.1"}
		artifacts = map[a2a.ArtifactID][]a2a.Part{}
		for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
			if err != nil {
				t.Fatalf("SendStreamingMessage: %v", err)
			}
			switch e := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				if id, _ := e.Metadata["llm_response_id"].(string); id != string(e.Artifact.ID) {
					t.Errorf("artifact %s with llm_response_id %q", e.Artifact.ID, id)
				}
				for _, p := range e.Artifact.Parts {
					artifacts[e.Artifact.ID] = append(artifacts[e.Artifact.ID], *p)
				}
			case *a2a.TaskStatusUpdateEvent:
				last = e
			}
		}
		return artifacts, last
	}

	arts, last := stream("fixture:text")
	if last == nil || last.Status.State != a2a.TaskStateCompleted || len(arts) != 1 {
		t.Fatalf("text: last status %+v, artifacts %v", last, arts)
	}
	var text string
	for _, p := range arts[a2a.ArtifactID(fixtures["text"].id)] {
		text += p.Text()
	}
	if text != fixtures["text"].content {
		t.Fatalf("text %q, want %q", text, fixtures["text"].content)
	}

	arts, last = stream("fixture:tools")
	if last == nil || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("tools: last status %+v", last)
	}
	var calls []call
	for _, p := range arts[a2a.ArtifactID(fixtures["tools"].id)] {
		d, _ := p.Data().(map[string]any)
		if typ, _ := p.Metadata["type"].(string); typ != "function_call" || d == nil {
			continue
		}
		calls = append(calls, call{fmt.Sprint(d["id"]), fmt.Sprint(d["name"]), fmt.Sprint(d["args"])})
	}
	if !equalCalls(calls, fixtures["tools"].calls) {
		t.Fatalf("function_call parts %+v, want %+v (artifacts %v)", calls, fixtures["tools"].calls, arts)
	}
}

package a2av1_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestTextAndDataPartFieldsKept: a v1.0 text or data part's mediaType and
// filename ("available for all part types", a2a.proto Part) reach the
// agent (params.content_blocks' text block mimeType/name,
// params.data_parts' mime_type/name, as a file's) and the task's history
// (GetTask, sent with a2a-go/v2's client on both HTTP bindings), as a
// file part's always did. The SDK's conversion to v0.3, whose text and
// data parts have neither, dropped them on the way in.
func TestTextAndDataPartFieldsKept(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("parts")))
	seen := make(chan *e2a.Envelope, 4)
	p.Pool("parts", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		seen <- env
		return agent.Interrupt(w, e2a.StateInputRequired, "which one?") // answered as a Task

	}))
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		c := tenantClient(t, p.URL+a2av1.Path, "", binding)
		md := &a2a.Part{Content: a2a.Text("# Title"), MediaType: "text/markdown", Filename: "notes.md"}
		data := &a2a.Part{Content: a2a.Data{Value: map[string]any{"k": "v"}}, MediaType: "application/vnd.example+json", Filename: "k.json"}
		for name, parts := range map[string][]*a2a.Part{"one text part": {md}, "text and data": {md, data}} {
			msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
			res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg})
			if err != nil {
				t.Fatalf("%s %s: SendMessage: %v", binding, name, err)
			}
			env := <-seen
			checkAgentSaw(t, string(binding)+" "+name, env, len(parts))
			task, ok := res.(*a2a.Task)
			if !ok {
				t.Fatalf("%s %s: answer %T, want a task", binding, name, res)
			}
			got, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatalf("%s %s: GetTask: %v", binding, name, err)
			}
			var user *a2a.Message
			for _, m := range got.History {
				if m.ID == msg.ID {
					user = m
				}
			}
			if user == nil || len(user.Parts) != len(parts) {
				t.Fatalf("%s %s: GetTask's history %v lacks the message sent", binding, name, got.History)
			}
			for i, want := range parts {
				if g := user.Parts[i]; g.MediaType != want.MediaType || g.Filename != want.Filename {
					t.Errorf("%s %s: history part %d has mediaType %q, filename %q; sent %q, %q",
						binding, name, i, g.MediaType, g.Filename, want.MediaType, want.Filename)
				}
			}
		}
	}
}

// checkAgentSaw checks that env, the envelope of a message whose first
// part is a text/markdown notes.md text part and whose second (when n is
// 2) a k.json data part, carries both parts' media type and filename.
func checkAgentSaw(t *testing.T, name string, env *e2a.Envelope, n int) {
	t.Helper()
	blocks, _ := env.Params["content_blocks"].([]any)
	if len(blocks) == 0 {
		t.Errorf("%s: the agent got no content_blocks: %v", name, env.Params)
	} else if b, _ := blocks[0].(map[string]any); b["mimeType"] != "text/markdown" || b["name"] != "notes.md" {
		t.Errorf("%s: the agent's text block %v, want mimeType text/markdown, name notes.md", name, b)
	}
	if n < 2 {
		return
	}
	dps, _ := env.Params["data_parts"].([]any)
	if len(dps) != 1 {
		t.Errorf("%s: the agent's data_parts %v, want one", name, dps)
	} else if d, _ := dps[0].(map[string]any); d["mime_type"] != "application/vnd.example+json" || d["name"] != "k.json" {
		t.Errorf("%s: the agent's data part %v, want mime_type application/vnd.example+json, name k.json", name, d)
	}
}

// TestDataPartValueShownAsSent: a v1.0 data part's value may be any JSON
// value (a2a.proto: google.protobuf.Value); one that is not an object
// (5, [1,2], "s") is shown in the task's history as sent. It came back as
// {"value": 5} with metadata data_part_compat: true, the SDK's wrapping
// for v0.3 (whose data is an object), which its own reading back undoes.
func TestDataPartValueShownAsSent(t *testing.T) {
	p := askPipeline(t)
	c := tenantClient(t, p.URL+a2av1.Path, "", a2a.TransportProtocolJSONRPC)
	values := []any{float64(5), []any{float64(1), float64(2)}, "s", map[string]any{"value": "kept"}}
	parts := []*a2a.Part{a2a.NewTextPart("hi")}
	for _, v := range values {
		parts = append(parts, a2a.NewDataPart(v))
	}
	parts[2].Metadata = map[string]any{"k": "v"}
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("answer %T, want a task", res)
	}
	got, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got.History {
		if m.ID != msg.ID {
			continue
		}
		if len(m.Parts) != len(parts) {
			t.Fatalf("history message has %d parts, sent %d", len(m.Parts), len(parts))
		}
		for i, want := range parts[1:] {
			g := m.Parts[i+1]
			if !reflect.DeepEqual(g.Data(), want.Data()) || !reflect.DeepEqual(g.Metadata, want.Metadata) {
				t.Errorf("data part %d: history has %#v (metadata %v), sent %#v (metadata %v)", i, g.Data(), g.Metadata, want.Data(), want.Metadata)
			}
		}
		return
	}
	t.Fatalf("GetTask's history %v lacks the message sent", got.History)
}

package a2abridge_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestArtifactMetadataReachesA2AClients: the metadata of an upstream
// artifact and of its parts, a text artifact (streamed in two chunks, the
// second appended) as a data artifact, reaches an A2A v1.0 client of the
// pipeline as the agent sent it: in the stream, in message/send's task,
// and in tasks/get; the text reaches an ACP client all the same.
func TestArtifactMetadataReachesA2AClients(t *testing.T) {
	t.Parallel()
	for _, u := range goKinds("go-jsonrpc", "go-jsonrpc-nostream", "go-v03-jsonrpc") {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			a, p := u.bridged(t)
			// The agent itself sends them so (a2a-go's client).
			text := up.ArtifactMeta + ": " + u.name
			if err := up.Collect(t, up.Connect(t, a.url, strings.Contains(u.name, "v03")).SendStreamingMessage(context.Background(), up.Msg(text)), nil).Check(text, false); err != nil {
				t.Fatalf("the agent's own answer: %v", err)
			}
			c := v1Client(t, p, "agent")
			for _, how := range []string{"stream", "send"} {
				text := up.ArtifactMeta + ": " + u.name + " " + how
				var turn *up.Turn
				if how == "stream" {
					turn = up.Collect(t, c.SendStreamingMessage(context.Background(), up.Msg(text)), nil)
				} else {
					turn = up.Send(t, c, up.Msg(text))
				}
				if err := turn.Check(text, false); err != nil {
					t.Errorf("%s: %v", how, err)
				}
				task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
				if err != nil {
					t.Fatalf("GetTask: %v", err)
				}
				got := up.NewTurn()
				got.Add(task)
				if err := got.Check(text, false); err != nil {
					t.Errorf("%s, tasks/get: %v", how, err)
				}
			}
			body := u.name + " acp"
			if s := openACP(t, p, "agent").send(t, up.ArtifactMeta+": "+body); s.state != "completed" || s.text != up.MetaText(body) ||
				len(s.data) != 1 || !reflect.DeepEqual(s.data[0], up.StreamData()) {
				t.Errorf("ACP: %s, text %q, data %v; want completed, %q, %v", s.state, s.text, s.data, up.MetaText(body), up.StreamData())
			}
		})
	}
}

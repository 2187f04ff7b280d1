package jsupstream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	js "github.com/e2a-pipeline/pipeline/internal/jsupstream"
)

// TestJSV03ProtoGaps documents why the bridge's tests take @a2a-js/sdk
// 1.3.0 as an A2A v0.3 agent over JSON-RPC only, and fails when a gap is
// gone. Over HTTP+JSON, the SDK answers a v0.3 message:send with 201
// Created (dist/compat/v0_3/server/express/index.js, the /v1/message:send
// route: HTTP_STATUS.CREATED), which a2a-go/v2 v2.4.0's v0.3 client
// refuses (a2acompat/a2av0/rest_client.go: "StatusCode !=
// http.StatusOK && != http.StatusNoContent"). Over HTTP+JSON and gRPC, the
// SDK's v0.3 proto has no Part.metadata (dist/compat/v0_3/server/grpc/
// index.js, Part's encode: text, file or data only; the field came into
// the v0.3 proto after 0.3.0), so a streamed thought arrives as plain
// text, without its thought marker.
func TestJSV03ProtoGaps(t *testing.T) {
	ctx := context.Background()
	t.Run("rest-201", func(t *testing.T) {
		s := js.Start(t, js.Options{Binding: httpjson, V03: true})
		c := up.Connect(t, s.BaseURL(), true)
		if _, err := c.SendMessage(ctx, up.Msg("just words")); err == nil {
			t.Error("a2a-go's v0.3 client took the SDK's answer to message:send: the gap this test documents is gone")
		}
		body := `{"message":{"messageId":"m-1","role":"ROLE_USER","content":[{"text":"just words"}]}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.InterfaceURL()+"/v1/message:send", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct{ Task struct{ ID string } }
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusCreated || v.Task.ID == "" {
			t.Errorf("v0.3 message:send: %s, task %q (%v); want 201 Created with the task", resp.Status, v.Task.ID, err)
		}
	})
	for _, b := range []a2a.TransportProtocol{httpjson, grpcproto} {
		t.Run("part-metadata/"+string(b), func(t *testing.T) {
			s := js.Start(t, js.Options{Binding: b, V03: true})
			c := up.Connect(t, s.BaseURL(), true)
			turn := up.Collect(t, c.SendStreamingMessage(ctx, up.Msg("stream: gaps")), nil)
			if turn.State() != a2a.TaskStateCompleted || turn.Text(up.TextArtifact) != up.StreamText("gaps") {
				t.Fatalf("stream over v0.3 %s: %s, text %q", b, turn.State(), turn.Text(up.TextArtifact))
			}
			th := turn.Artifacts[up.ThoughtArtifact]
			if th == nil || len(th.Parts) != 1 || th.Parts[0].Text() != up.Thought("gaps") {
				t.Fatalf("thought artifact %+v", th)
			}
			if th.Parts[0].Metadata["thought"] == true {
				t.Error("the thought part kept its metadata over v0.3: the gap this test documents is gone")
			}
		})
	}
}

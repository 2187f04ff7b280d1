package a2abridge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// newStreamingAgent serves an A2A v1.0 card (JSON-RPC, streaming) and
// answers every call with the SSE body the fuzz case sets: an agent whose
// stream is anything at all.
func newStreamingAgent(f *testing.F) *testkit.Answerer {
	var a *testkit.Answerer
	a = testkit.NewAnswerer(f, "text/event-stream", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"name":"fuzz","description":"d","version":"1","capabilities":{"streaming":true},"skills":[],`+
			`"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],`+
			`"supportedInterfaces":[{"url":"%s/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`, a.URL)
	})
	return a
}

// event is one SSE event of a JSON-RPC stream whose result is res.
func event(res string) string { return `data: {"jsonrpc":"2.0","id":"x","result":` + res + "}\n\n" }

// FuzzAgentStream: whatever an A2A agent streams back, the bridge's call
// ends in time with nil after exactly one final frame, or with an error
// the bridge maps (a bridge.Error or an agent.Error); every frame it
// writes is one the runtime takes, none after the final one, and no panic.
func FuzzAgentStream(f *testing.F) {
	a := newStreamingAgent(f)
	c, err := bridge.NewClient(a.URL, bridge.WithConnectTimeout(time.Second), bridge.WithIdleTimeout(2*time.Second))
	if err != nil {
		f.Fatal(err)
	}
	up, err := a2abridge.New(context.Background(), c)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = up.Close() })
	task := `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}`
	working := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"w","role":"ROLE_AGENT","parts":[{"text":"thinking","metadata":{"thought":true}}]}}}}`
	art := `{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"hel"}]}}}`
	art2 := `{"artifactUpdate":{"taskId":"t1","contextId":"c1","append":true,"lastChunk":true,"artifact":{"artifactId":"a1","parts":[{"text":"lo"},{"data":{"k":[1,2]}},{"url":"https://x.example/f","mediaType":"text/plain"}]}}}`
	done := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	ask := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"q","role":"ROLE_AGENT","parts":[{"text":"Which city?"}]}}}}`
	failed := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"f","role":"ROLE_AGENT","parts":[{"text":"no"}]}}}}`
	for _, s := range []string{
		event(task) + event(working) + event(art) + event(art2) + event(done),
		event(task) + event(ask),
		event(task) + event(failed),
		event(`{"message":{"messageId":"m","contextId":"c1","role":"ROLE_AGENT","parts":[{"text":"direct"}]}}`),
		event(task) + event(art), // ends before the task does
		// A task whose artifacts hold null (a2a-go's client passes it on
		// as a nil *Artifact): the bridge panicked reading it.
		event(`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"},"artifacts":[null,{"artifactId":"a1","parts":[null,{"text":"hi"}]}]}}`) + event(done),
		`data: {"jsonrpc":"2.0","id":"x","error":{"code":-32001,"message":"Task not found"}}` + "\n\n",
		event(task) + "data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"statusUpd",
		"not an event stream",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a.Set(body)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w := &agenttest.Writer{}
		env := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: "q", Params: map[string]any{"text": "hi"}}
		err := up.Call(ctx, env, w)
		if ctx.Err() != nil {
			t.Fatalf("%q: the call did not end in time (%v)", body, err)
		}
		if w.AfterFinal() > 0 {
			t.Fatalf("%q: %d frames after the final one: %q", body, w.AfterFinal(), w.Kinds())
		}
		if err == nil {
			if !w.Final() {
				t.Fatalf("%q: nil without a final frame: %q", body, w.Kinds())
			}
			return
		}
		var be *bridge.Error
		var ae *agent.Error
		if !errors.As(err, &be) && !errors.As(err, &ae) {
			t.Fatalf("%q: error %T %v is neither a bridge.Error nor an agent.Error", body, err, err)
		}
		if errors.Is(err, e2a.ErrInvalidResponse) {
			t.Fatalf("%q: the bridge wrote a frame the runtime refuses: %v", body, err)
		}
	})
}

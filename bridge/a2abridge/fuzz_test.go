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

// callWithin calls up for a request "hi" with a 5 s deadline: under the
// fuzz worker's own limit (10 s per input), so that a call that does not
// end fails its test, with its input, instead of the worker being killed
// ("hung or terminated unexpectedly"). late reports it ran to the
// deadline.
func callWithin(up *a2abridge.Upstream) (w *agenttest.Writer, late bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w = &agenttest.Writer{}
	env := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: "q", Params: map[string]any{"text": "hi"}}
	err = up.Call(ctx, env, w)
	return w, ctx.Err() != nil, err
}

// newStreamingAgent serves an A2A v1.0 card (JSON-RPC, streaming) and
// answers every call, a stream's or a subscription's, with the SSE body
// last set: an agent whose stream is anything at all. up is the bridge's
// upstream of it (idle timeout 2 s).
func newStreamingAgent(tb testing.TB) (a *testkit.Answerer, up *a2abridge.Upstream) {
	a = testkit.NewAnswerer(tb, "text/event-stream", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"name":"fuzz","description":"d","version":"1","capabilities":{"streaming":true},"skills":[],`+
			`"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],`+
			`"supportedInterfaces":[{"url":"%s/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`, a.URL)
	})
	c, err := bridge.NewClient(a.URL, bridge.WithConnectTimeout(time.Second), bridge.WithIdleTimeout(2*time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	up, err = a2abridge.New(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = up.Close() })
	return a, up
}

// The events of a task's stream as an agent sends them (JSON-RPC
// results): the task, submitted; a working status with a thought; an
// artifact's first text; its last chunk, appended, with a data and a
// file part.
const (
	sseTask    = `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}`
	sseWorking = `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"w","role":"ROLE_AGENT","parts":[{"text":"thinking","metadata":{"thought":true}}]}}}}`
	sseArt     = `{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"hel"}]}}}`
	sseArt2    = `{"artifactUpdate":{"taskId":"t1","contextId":"c1","append":true,"lastChunk":true,"artifact":{"artifactId":"a1","parts":[{"text":"lo"},{"data":{"k":[1,2]}},{"url":"https://x.example/f","mediaType":"text/plain"}]}}}`
)

// event is one SSE event of a JSON-RPC stream whose result is res.
func event(res string) string { return `data: {"jsonrpc":"2.0","id":"x","result":` + res + "}\n\n" }

// FuzzAgentStream: whatever an A2A agent streams back, the bridge's call
// ends in time with nil after exactly one final frame, or with an error
// the bridge maps (a bridge.Error or an agent.Error); every frame it
// writes is one the runtime takes, none after the final one, and no panic.
func FuzzAgentStream(f *testing.F) {
	a, up := newStreamingAgent(f)
	done := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	ask := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"q","role":"ROLE_AGENT","parts":[{"text":"Which city?"}]}}}}`
	failed := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"f","role":"ROLE_AGENT","parts":[{"text":"no"}]}}}}`
	for _, s := range []string{
		event(sseTask) + event(sseWorking) + event(sseArt) + event(sseArt2) + event(done),
		event(sseTask) + event(ask),
		event(sseTask) + event(failed),
		event(`{"message":{"messageId":"m","contextId":"c1","role":"ROLE_AGENT","parts":[{"text":"direct"}]}}`),
		event(sseTask) + event(sseArt), // ends before the task does
		// Every stream and subscription replays the same events and ends
		// before the task does: each re-subscription wrote frames (the
		// status message again, the artifact rewritten), renewing the
		// budget, until the request's deadline (TestStreamCutReplayEnds).
		event(sseTask) + event(sseWorking) + event(sseArt) + event(sseArt2),
		// A task whose artifacts hold null (a2a-go's client passes it on
		// as a nil *Artifact): the bridge panicked reading it.
		event(`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"},"artifacts":[null,{"artifactId":"a1","parts":[null,{"text":"hi"}]}]}}`) + event(done),
		`data: {"jsonrpc":"2.0","id":"x","error":{"code":-32001,"message":"Task not found"}}` + "\n\n",
		event(sseTask) + "data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"statusUpd",
		"not an event stream",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a.Set(body)
		w, late, err := callWithin(up)
		if late {
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

package a2abridge_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestRepeatedStatusMessageOnce: a working status message the agent
// sends again with the same messageId is written once in the request's
// stored frames (as the agent's status-update): an agent that sends it twice in its stream (twice), or
// again as its completed status's message (final), a
// subscription after a cut that replays the task's status after the task
// (resubscribed: the message was written from the task's status), and
// the same replay to the worker that took the request over from one that
// died right after writing the message (takeover). It was written again
// each time.
func TestRepeatedStatusMessageOnce(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"twice", "final", "resubscribed", "takeover"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			agent := cutAgent{say: "meanwhile ", twice: v == "twice", final: v == "final"}
			var a pipetest.Answer
			switch v {
			case "twice", "final":
				p := pipetest.Start(t)
				bridgePool(t, p, "agent", serveA2A(t, a2asrv.NewHandler(agent)))
				a = p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
			case "resubscribed":
				agent.release = make(chan struct{})
				var subscribed atomic.Int32
				h := failingStream{a2asrv.NewHandler(agent), false, false, &subscribed}
				p := pipetest.Start(t)
				bridgePool(t, p, "agent", serveA2A(t, statusHeld{h, agent.release, new(sync.Once), true}))
				a = p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
			case "takeover":
				agent.release = make(chan struct{})
				a = replayedAfterTakeover(t, agent)
			}
			const want = "one two meanwhile three "
			if got := saidText(t, a.Frames); got != want {
				t.Errorf("answer and status messages %q, want %q (the status message %d times)", got, want, strings.Count(got, "meanwhile "))
			}
			c, err := a.Final().Complete()
			if err != nil {
				t.Fatalf("final %s: %v", a.Final().ResponseKind, err)
			}
			// The result's text: the artifact's (the status message is
			// the agent's status-update, not the answer).
			if res, _ := c.Result.(map[string]any); res["text"] != "one two three " {
				t.Errorf("the result's text %q, want %q", res["text"], "one two three ")
			}
		})
	}
}

// replayedAfterTakeover is the stored answer of a request to agent
// whose worker dies right after writing the agent's status message; the
// worker taking it over subscribes to the agent's task, which replays
// its status (the same message) after the task.
func replayedAfterTakeover(t *testing.T, agent cutAgent) pipetest.Answer {
	t.Helper()
	url := serveA2A(t, statusHeld{a2asrv.NewHandler(agent), agent.release, new(sync.Once), true})
	return takenOver(t, url, "said-once", agent.say)
}

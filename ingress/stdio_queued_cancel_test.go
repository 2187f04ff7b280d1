package ingress_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// queuedCancel drives a session/cancel read while the session's second
// prompt, read before it, is not published yet: the hook holds that
// prompt's handler (its second "run" of session/prompt) until release,
// and the agent holds a request with params.hold = true until it is
// cancelled.
type queuedCancel struct {
	prompts     atomic.Int32
	secondHeld  chan struct{} // closed when the second prompt's handler is held
	release     chan struct{}
	cancelWaits chan struct{} // closed when a session/cancel waits before its handler
	waitOnce    sync.Once
	started     chan struct{} // closed when the held request's handler runs
	startOnce   sync.Once
	stop        <-chan struct{}

	mu     sync.Mutex
	served []string // params.mark of the requests whose handler ran
}

func newQueuedCancel(t *testing.T) *queuedCancel {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &queuedCancel{secondHeld: make(chan struct{}), release: make(chan struct{}), cancelWaits: make(chan struct{}),
		started: make(chan struct{}), stop: ctx.Done()}
}

func (q *queuedCancel) hook(event, method string) {
	switch {
	case event == "run" && method == "session/prompt":
		if q.prompts.Add(1) == 2 {
			close(q.secondHeld)
			select {
			case <-q.release:
			case <-q.stop:
			}
		}
	case event == "wait" && method == "session/cancel":
		q.waitOnce.Do(func() { close(q.cancelWaits) })
	}
}

func (q *queuedCancel) agent() agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		q.mu.Lock()
		q.served = append(q.served, fmt.Sprint(env.Params["mark"]))
		q.mu.Unlock()
		if env.Params["hold"] == true {
			q.startOnce.Do(func() { close(q.started) })
			<-ctx.Done()
			return ctx.Err()
		}
		return demo.New().Serve(ctx, env, w)
	})
}

func (q *queuedCancel) servedMarks() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.served...)
}

// TestStdioSessionCancelOfUnpublishedQueuedPrompt: over stdio, prompt one
// runs (held by the agent), prompt two of the same session is read and
// held before its publish, then session/cancel is read. The cancel of two
// can only be sent once two is published; the cancel of one must wait for
// it (the session's cancels go newest first, each stored before the
// next), or one ends, two is published and runs at once, and its cancel
// comes too late: two answered end_turn (bridge/openai's
// TestACPCancelRunningAndQueuedOpenAI flake). So one is not answered while
// two is held; once two is released both end cancelled, two's handler
// never runs, and a prompt read after the cancel runs.
func TestStdioSessionCancelOfUnpublishedQueuedPrompt(t *testing.T) {
	q := newQueuedCancel(t)
	in, out, _, _ := startStdioHooked(t, q.hook, q.agent())
	r := readStdio(t, out)
	sid := initSession(t, in, r)
	prompt := func(id int, mark, params string) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"session/prompt","params":{"sessionId":"` + sid +
			`","mark":"` + mark + `","prompt":[{"type":"text","text":"` + mark + `"}]` + params + "}}\n"
	}
	send(t, in, prompt(1, "one", `,"hold":true`))
	select {
	case <-q.started:
	case <-time.After(15 * time.Second):
		t.Fatal("prompt one never reached the agent")
	}
	send(t, in, prompt(2, "two", ""))
	select {
	case <-q.secondHeld:
	case <-time.After(15 * time.Second):
		t.Fatal("prompt two's handler never started")
	}
	send(t, in, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`+"\n")
	stops := map[string]any{}
	answer := func(m map[string]any) {
		res, _ := m["result"].(map[string]any)
		stops[fmt.Sprint(m["id"])] = res["stopReason"]
		if res == nil {
			stops[fmt.Sprint(m["id"])] = m["error"]
		}
	}
	waiting := true
	for waiting {
		select {
		case <-q.cancelWaits:
			waiting = false
		case m, ok := <-r.lines:
			if !ok {
				t.Fatal("stdout closed")
			}
			if _, isResp := m["id"]; isResp {
				t.Fatalf("answer %v while prompt two, read before the session/cancel, is not published: "+
					"the running prompt was cancelled before the queued one could be", m)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the session/cancel neither waited for the queued prompt nor cancelled the running one")
		}
	}
	close(q.release)
	for len(stops) < 2 {
		answer(r.next())
	}
	if stops["1"] != "cancelled" || stops["2"] != "cancelled" {
		t.Fatalf("stop reasons %v, want 1 and 2 cancelled", stops)
	}
	send(t, in, prompt(3, "three", ""))
	if m := r.next(); m["id"] != float64(3) || m["result"].(map[string]any)["stopReason"] != "end_turn" {
		t.Fatalf("prompt read after the cancel: %v", m)
	}
	if got := fmt.Sprint(q.servedMarks()); got != "[one three]" {
		t.Fatalf("handlers run for %s, want [one three]: the queued prompt two must end cancelled without running", got)
	}
}

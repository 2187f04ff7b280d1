package ingress_test

// The ACP stdio session/cancel ordering (cancelSession): a prompt sent as
// a notification is cancelled too, and a cancel that waits for a queued
// prompt's publish delays nothing else and ends with the connection.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
)

// reviewBound bounds every wait of these tests for an event that must come.
const reviewBound = 15 * time.Second

// reviewPrompt is a session/prompt of session sid marked mark (the agent
// of queuedCancel records it; params ends the params object), a request
// with id, or a notification when id is 0.
func reviewPrompt(sid string, id int, mark, params string) string {
	idPart := ""
	if id != 0 {
		idPart = `"id":` + strconv.Itoa(id) + `,`
	}
	return `{"jsonrpc":"2.0",` + idPart + `"method":"session/prompt","params":{"sessionId":"` + sid +
		`","mark":"` + mark + `","prompt":[{"type":"text","text":"` + mark + `"}]` + params + "}}\n"
}

func reviewCancel(sid string) string {
	return `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}` + "\n"
}

func reviewWait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(reviewBound):
		t.Fatal(what)
	}
}

// reviewStops reads responses until n are read, and returns their stop
// reasons (or errors) by id.
func reviewStops(r *stdioReader, n int) map[string]any {
	stops := map[string]any{}
	for len(stops) < n {
		m := r.next()
		res, _ := m["result"].(map[string]any)
		if res == nil {
			stops[fmt.Sprint(m["id"])] = m["error"]
			continue
		}
		stops[fmt.Sprint(m["id"])] = res["stopReason"]
	}
	return stops
}

// reviewHold drives a running prompt one (held by the agent until
// cancelled) and a second prompt of the session held before its publish
// (queuedCancel's hook), for session sid. second is the second prompt's
// line.
func reviewHold(t *testing.T, q *queuedCancel, in io.Writer, sid, second string) {
	t.Helper()
	send(t, in, reviewPrompt(sid, 1, "one", `,"hold":true`))
	reviewWait(t, q.started, "prompt one never reached the agent")
	send(t, in, second)
	reviewWait(t, q.secondHeld, "the second prompt's handler never started")
}

// TestStdioSessionCancelOfQueuedNotificationPrompt: a session/prompt sent
// as a notification (no id) is a turn of the session (published and run):
// a session/cancel read after it cancels it as it cancels a prompt with an
// id, waiting for its publish (held here by the hook). It got no pipeline
// request id before it ran, so it was not among the prompts a
// session/cancel cancels (found by review): the running prompt was
// cancelled at once, the cancel's handler read the session before the
// notification was recorded, and the notification, read BEFORE the
// session/cancel, ran to its end (a model call the client abandoned, and
// a turn of the session's history).
func TestStdioSessionCancelOfQueuedNotificationPrompt(t *testing.T) {
	q := newQueuedCancel(t)
	cancelDone, cancelWaits := make(chan struct{}), make(chan struct{})
	var doneOnce, waitOnce sync.Once
	hook := func(event, method string) {
		q.hook(event, method)
		switch {
		case event == "done" && method == "session/cancel":
			doneOnce.Do(func() { close(cancelDone) })
		case event == "cancel-wait":
			waitOnce.Do(func() { close(cancelWaits) })
		}
	}
	in, out, _, _ := startStdioHooked(t, hook, q.agent())
	r := readStdio(t, out)
	sid := initSession(t, in, r)
	reviewHold(t, q, in, sid, reviewPrompt(sid, 0, "two", ""))
	send(t, in, reviewCancel(sid))
	select {
	case <-cancelDone:
		t.Errorf("the session/cancel's handler returned while the notification prompt read before it was not " +
			"published: its cancel was never ordered before the running prompt's")
	case <-cancelWaits: // the cancel waits for the held prompt's publish
	case <-time.After(reviewBound):
		t.Fatal("the session/cancel neither waited for the held prompt nor returned")
	}
	close(q.release)
	if stops := reviewStops(r, 1); stops["1"] != "cancelled" {
		t.Fatalf("prompt one: %v, want cancelled", stops)
	}
	send(t, in, reviewPrompt(sid, 3, "three", ""))
	if stops := reviewStops(r, 1); stops["3"] != "end_turn" {
		t.Fatalf("prompt read after the cancel: %v, want end_turn", stops)
	}
	if got := fmt.Sprint(q.servedMarks()); got != "[one three]" {
		t.Fatalf("handlers run for %s, want [one three]: the notification prompt two, read before the "+
			"session/cancel, ran instead of being cancelled", got)
	}
}

// TestStdioSessionCancelDoesNotDelayOtherSessions: while a session/cancel waits for a queued prompt of its session
// to be published, the calls of another session (session/new, a prompt)
// are answered: they never wait for it.
func TestStdioSessionCancelDoesNotDelayOtherSessions(t *testing.T) {
	q, in, r, _, _ := heldCancel(t, 1)
	send(t, in, `{"jsonrpc":"2.0","id":"s2","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
	m := r.next()
	other, _ := m["result"].(map[string]any)["sessionId"].(string)
	if m["id"] != "s2" || other == "" {
		t.Fatalf("session/new while a session/cancel waits: %v", m)
	}
	send(t, in, reviewPrompt(other, 7, "other", ""))
	if stops := reviewStops(r, 1); stops["7"] != "end_turn" {
		t.Fatalf("another session's prompt while a session/cancel waits: %v, want end_turn", stops)
	}
	close(q.release)
	if stops := reviewStops(r, 2); stops["1"] != "cancelled" || stops["2"] != "cancelled" {
		t.Fatalf("stop reasons %v, want 1 and 2 cancelled", stops)
	}
}

// TestStdioTwoSessionCancelsInARow: two session/cancels in a row, both read while the queued prompt
// is not published: both wait, both prompts end cancelled once it is, and
// a prompt read after them runs.
func TestStdioTwoSessionCancelsInARow(t *testing.T) {
	q, in, r, sid, _ := heldCancel(t, 2)
	close(q.release)
	if stops := reviewStops(r, 2); stops["1"] != "cancelled" || stops["2"] != "cancelled" {
		t.Fatalf("stop reasons %v, want 1 and 2 cancelled", stops)
	}
	send(t, in, reviewPrompt(sid, 3, "three", ""))
	if stops := reviewStops(r, 1); stops["3"] != "end_turn" {
		t.Fatalf("prompt read after the cancels: %v, want end_turn", stops)
	}
	if got := fmt.Sprint(q.servedMarks()); got != "[one three]" {
		t.Fatalf("handlers run for %s, want [one three]", got)
	}
}

// TestStdioEOFWhileSessionCancelWaits: the end of in while a session/cancel waits for a queued prompt's
// publish: ServeACPStdio answers both prompts (cancelled) and returns nil.
func TestStdioEOFWhileSessionCancelWaits(t *testing.T) {
	q, in, r, _, done := heldCancel(t, 1)
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("ServeACPStdio returned %v with two prompts unanswered", err)
	default:
	}
	close(q.release)
	if stops := reviewStops(r, 2); stops["1"] != "cancelled" || stops["2"] != "cancelled" {
		t.Fatalf("stop reasons %v, want 1 and 2 cancelled", stops)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeACPStdio at EOF: %v", err)
		}
	case <-time.After(reviewBound):
		t.Fatal("ServeACPStdio did not return at EOF once every request was answered")
	}
}

// reviewStoppable is h, its handlers' contexts also ended when stop is
// closed.
func reviewStoppable(stop <-chan struct{}, h agent.Handler) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-hctx.Done():
			}
		}()
		return h.Serve(hctx, env, w)
	})
}

// TestStdioCtxEndWhileSessionCancelWaits: the end of ServeACPStdio's ctx while a session/cancel waits for a
// queued prompt's publish (that prompt held until ctx ends): it returns.
func TestStdioCtxEndWhileSessionCancelWaits(t *testing.T) {
	q := newQueuedCancel(t)
	// The held prompt one is not cancelled in the pipeline when ctx ends:
	// its handler is ended at the test's end, not by the agent's drain.
	stopAgent := make(chan struct{})
	srv, _ := stdioPipeline(t, reviewStoppable(stopAgent, q.agent()))
	t.Cleanup(func() { close(stopAgent) }) // runs before the pipeline's cleanup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var prompts atomic.Int32
	held, cancelWaits := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(event, method string) {
		switch {
		case event == "run" && method == "session/prompt" && prompts.Add(1) == 2:
			close(held)
			<-ctx.Done()
		case event == "wait" && method == "session/cancel":
			once.Do(func() { close(cancelWaits) })
		}
	}
	inR, in := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { _ = in.Close(); _ = outR.Close() })
	done := make(chan error, 1)
	go func() {
		err := ingress.ServeACPStdio(ingress.WithStdioHook(ctx, hook), inR, outW, srv)
		_ = outW.Close()
		done <- err
	}()
	r := readStdio(t, outR)
	sid := initSession(t, in, r)
	send(t, in, reviewPrompt(sid, 1, "one", `,"hold":true`))
	reviewWait(t, q.started, "prompt one never reached the agent")
	send(t, in, reviewPrompt(sid, 2, "two", ""))
	reviewWait(t, held, "prompt two's handler never started")
	send(t, in, reviewCancel(sid))
	reviewWait(t, cancelWaits, "the session/cancel did not wait for the queued prompt")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeACPStdio at ctx's end: %v", err)
		}
	case <-time.After(reviewBound):
		t.Fatal("ServeACPStdio did not return at ctx's end while a session/cancel waited")
	}
}

// heldCancel starts a stdio connection whose session runs prompt one
// (held until cancelled) with prompt two held before its publish, then
// sends cancels session/cancels of it and waits until one waits for
// prompt two's publish.
func heldCancel(t *testing.T, cancels int) (*queuedCancel, io.WriteCloser, *stdioReader, string, <-chan error) {
	t.Helper()
	q := newQueuedCancel(t)
	in, out, done, _ := startStdioHooked(t, q.hook, q.agent())
	r := readStdio(t, out)
	sid := initSession(t, in, r)
	reviewHold(t, q, in, sid, reviewPrompt(sid, 2, "two", ""))
	for range cancels {
		send(t, in, reviewCancel(sid))
	}
	reviewWait(t, q.cancelWaits, "the session/cancel did not wait for the queued prompt")
	return q, in, r, sid, done
}

package ingress_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// A stream that follows a queued turn, resumed by re-posting its call
// (the same Idempotency-Key) with the last event id it saw.

// followedCall is a streamed answer to task, Paris's, as a raw HTTP call
// (so that it can be re-posted with a resume point): path, body, and the
// headers every post of it carries (its Idempotency-Key: a re-post is the
// same request).
type followedCall struct {
	name, path, body string
	hdr              []string
}

// followedCalls are Paris's streamed answer to task over A2A v1.0
// JSON-RPC and HTTP+JSON, and v0.3 message/stream, each with its own
// Idempotency-Key.
func followedCalls(task *a2a.Task) []followedCall {
	tid, cid := string(task.ID), task.ContextID
	return []followedCall{
		{"v1-jsonrpc", "/a2a/v1", `{"jsonrpc":"2.0","id":3,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER",` +
			`"messageId":"m-paris-v1","taskId":"` + tid + `","contextId":"` + cid + `","parts":[{"text":"Paris"}]}}}`,
			[]string{"A2A-Version", "1.0", "Idempotency-Key", "paris-v1"}},
		{"v1-rest", "/a2a/v1/message:stream", `{"message":{"role":"ROLE_USER","messageId":"m-paris-rest","taskId":"` + tid +
			`","contextId":"` + cid + `","parts":[{"text":"Paris"}]}}`,
			[]string{"A2A-Version", "1.0", "Idempotency-Key", "paris-rest"}},
		{"v03", "/a2a", `{"jsonrpc":"2.0","id":3,"method":"message/stream","params":{"message":{"kind":"message","role":"user",` +
			`"messageId":"m-paris-v03","taskId":"` + tid + `","contextId":"` + cid + `","parts":[{"kind":"text","text":"Paris"}]}}}`,
			[]string{"Idempotency-Key", "paris-v03"}},
	}
}

// sseLines are the events as "<id> <data>" lines.
func sseLines(evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.id + " " + string(e.data) + "\n")
	}
	return b.String()
}

// liveSSE reads an SSE answer's events as they come (comments left
// out) onto the returned channel, closed at the answer's end.
func liveSSE(body io.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.data != nil || ev.event != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id:"):
				ev.id = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "event:"):
				ev.event = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:"):
				if ev.data != nil {
					ev.data = append(ev.data, '\n')
				}
				ev.data = append(ev.data, strings.TrimPrefix(line[5:], " ")...)
				if ev.data == nil {
					ev.data = []byte{}
				}
			}
		}
	}()
	return out
}

// askedParisRomeBegun is askedParisRome whose held turns write a chunk
// ("<text> begins, ") before they wait for their gate: a stream of the
// turn has an event of it while it is held.
func askedParisRomeBegun(t *testing.T) (*queuedTask, context.Context, *a2aclient.Client, *a2a.Task) {
	t.Helper()
	g := &queuedTask{Pipeline: pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("gated"))),
		started: make(chan string, 8), gates: map[string]chan struct{}{"Paris": make(chan struct{}), "Rome": make(chan struct{})}}
	g.Pool("gated", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		text, _ := env.Params["text"].(string)
		if text == "the weather" {
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		if err := w.Chunk(e2a.DeltaText, text+" begins, "); err != nil {
			return err
		}
		g.started <- text
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.gates[text]:
		}
		if err := w.Chunk(e2a.DeltaText, "Hello, "+text); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c := up.Client(t, g.URL)
	return g, ctx, c, up.Asked(t, ctx, c, up.Msg("the weather"))
}

// openCall posts c with hdr (the call's own headers added) to url, the
// call ending with ctx.
func openCall(t *testing.T, ctx context.Context, url string, c followedCall, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	hdr = append(append([]string{"Accept", "text/event-stream", "Content-Type", "application/json"}, c.hdr...), hdr...)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// droppedInRome streams Paris's answer c to an asked task, Rome's queued
// behind it, lets Paris's turn end and Rome's start (held), and reads
// Paris's stream to its first event of Rome's turn (id "<rome>:<seq>"):
// then the connection drops. It returns the events read, Rome's request
// id, and a function that lets Rome's turn end and waits for its answer.
func droppedInRome(t *testing.T, g *queuedTask, ctx context.Context, cl *a2aclient.Client, task *a2a.Task, c followedCall) ([]sseEvent, string, func()) {
	t.Helper()
	resp := openCall(t, ctx, g.URL, c)
	defer resp.Body.Close()
	evs := liveSSE(resp.Body)
	if s := <-g.started; s != "Paris" {
		t.Fatalf("started %q", s)
	}
	romeDone := make(chan error, 1)
	go func() {
		_, err := v1BlockingAnswer(cl)(ctx, task, "Rome")
		romeDone <- err
	}()
	var ids []string
	testkit.Eventually(t, 10*time.Second, "Rome's turn recorded behind Paris's", func() bool {
		ids = record(t, g.JS, ingress.KindTask, string(task.ID)).RequestIDs
		return len(ids) == 3
	})
	rome := ids[2]
	close(g.gates["Paris"])
	if s := <-g.started; s != "Rome" {
		t.Fatalf("started %q", s)
	}
	var seen []sseEvent
	for e := range evs {
		seen = append(seen, e)
		if strings.HasPrefix(e.id, rome+":") {
			return seen, rome, func() {
				close(g.gates["Rome"])
				if err := <-romeDone; err != nil {
					t.Fatalf("Rome: %v", err)
				}
			}
		}
	}
	t.Fatalf("Paris's stream (%s) ended before an event of Rome's turn (held):\n%s", c.name, sseLines(seen))
	return nil, "", nil
}

// resumedRest re-posts c with Last-Event-ID id while Rome's turn runs,
// lets Rome's turn end, and returns the re-post's status and events.
func resumedRest(t *testing.T, ctx context.Context, url string, c followedCall, id string, endRome func()) (int, []sseEvent) {
	t.Helper()
	resp := openCall(t, ctx, url, c, "Last-Event-ID", id)
	defer resp.Body.Close()
	endRome()
	var evs []sseEvent
	for e := range liveSSE(resp.Body) {
		evs = append(evs, e)
	}
	return resp.StatusCode, evs
}

// resumeCheck checks the answer of a re-post resumed after Paris's
// turn: Rome's reply and the task completed, the last event; nothing of
// Paris's reply, no error.
func resumeCheck(t *testing.T, c followedCall, id, what string, code int, evs []sseEvent) {
	t.Helper()
	got := sseLines(evs)
	if code != 200 || !strings.Contains(got, "Hello, Rome") || strings.Contains(got, "Hello, Paris") ||
		strings.Contains(strings.ToLower(got), "error") || len(evs) == 0 ||
		!strings.Contains(strings.ToLower(string(evs[len(evs)-1].data)), "completed") {
		t.Fatalf("%s re-posted with Last-Event-ID %q (%s) while Rome's turn runs: %d\n%s\nwant the stream's events after it: Rome's reply, then the task completed",
			c.name, id, what, code, got)
	}
}

// TestFollowedStreamResumeInLaterTurn: Paris's stream
// (v1.0 SendStreamingMessage on JSON-RPC and HTTP+JSON, v0.3
// message/stream) follows Rome's queued turn, whose events carry the ids
// "<rome>:<seq>". The client's connection drops in Rome's turn, which
// still runs; it re-posts the call (same Idempotency-Key: the same
// request) with the last id it saw, as a stream resumes. It gets the rest
// of Rome's turn, then the task completed (a2a.ServeFollowed). It got an
// error ("Last-Event-ID ... is not a frame sequence"; found by review): the
// stream wrote ids it could not resume from.
func TestFollowedStreamResumeInLaterTurn(t *testing.T) {
	resumeEach(t, func(t *testing.T, c followedCall, seen []sseEvent, _ string) (string, func(string, int, []sseEvent)) {
		id := seen[len(seen)-1].id
		return id, func(id string, code int, evs []sseEvent) {
			resumeCheck(t, c, id, "the first event of Rome's turn", code, evs)
		}
	})
}

// TestFollowedStreamResumeAtTurnBoundary: the client saw
// Paris's turn end (its status written submitted: the stream's last plain
// id, Paris's final frame) and its connection dropped; Rome's turn runs.
// It re-posts the call with that id and gets Rome's turn, then the task
// completed. It got nothing after the turn's end, Rome's turn never
// followed (found by review): the client was left with the task submitted
// and no end.
func TestFollowedStreamResumeAtTurnBoundary(t *testing.T) {
	resumeEach(t, func(t *testing.T, c followedCall, seen []sseEvent, rome string) (string, func(string, int, []sseEvent)) {
		id := ""
		for _, e := range seen {
			if e.id != "" && !strings.HasPrefix(e.id, rome+":") {
				id = e.id
			}
		}
		return id, func(id string, code int, evs []sseEvent) {
			resumeCheck(t, c, id, "Paris's last event: its end, submitted", code, evs)
		}
	})
}

// TestFollowedStreamResumeInFirstTurn: re-posted with
// the id of Paris's first event (a plain sequence) while Rome's turn
// runs, the stream resumes in Paris's turn and follows Rome's to the end.
func TestFollowedStreamResumeInFirstTurn(t *testing.T) {
	resumeEach(t, func(t *testing.T, c followedCall, seen []sseEvent, _ string) (string, func(string, int, []sseEvent)) {
		id := ""
		for _, e := range seen {
			if e.id != "" {
				id = e.id
				break
			}
		}
		return id, func(id string, code int, evs []sseEvent) {
			got := sseLines(evs)
			if code != 200 || !strings.Contains(got, "Hello, Paris") || !strings.Contains(got, "Hello, Rome") || strings.Contains(strings.ToLower(got), "error") {
				t.Fatalf("%s re-posted with Last-Event-ID %q: %d\n%s\nwant Paris's tail, then Rome's turn", c.name, id, code, got)
			}
		}
	})
}

// resumeEach runs, for Paris's streamed answer over A2A v1.0 JSON-RPC and
// HTTP+JSON and v0.3 message/stream, a stream that follows Rome's turn and
// drops in it (droppedInRome), then re-posts the call with the event id
// pick chooses among the events seen (Rome's request id given) and checks
// the resumed rest with the check pick returns.
func resumeEach(t *testing.T, pick func(t *testing.T, c followedCall, seen []sseEvent, rome string) (string, func(id string, code int, evs []sseEvent))) {
	for _, name := range []string{"v1-jsonrpc", "v1-rest", "v03"} {
		t.Run(name, func(t *testing.T) {
			g, ctx, cl, task := askedParisRomeBegun(t)
			c := callNamed(followedCalls(task), name)
			seen, rome, endRome := droppedInRome(t, g, ctx, cl, task, c)
			id, check := pick(t, c, seen, rome)
			code, evs := resumedRest(t, ctx, g.URL, c, id, endRome)
			check(id, code, evs)
		})
	}
}

func callNamed(cs []followedCall, name string) followedCall {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	panic(name)
}

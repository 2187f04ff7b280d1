package a2abridge_test

import (
	"bytes"
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// askThenAnswer runs the "ask:" exchange through pool "agent" of p: "ask:
// hi" ends input-required, "Ada" continues the same task. It returns the
// second turn, and checks that its stored answer is that turn's alone
// (the first turn's artifact, which the upstream task still holds, is not
// written again).
func askThenAnswer(t *testing.T, p *pipetest.Pipeline) *up.Turn {
	t.Helper()
	c := v1Client(t, p, "agent")
	first := up.Collect(t, c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("ask: hi")}), nil)
	if first.State() != a2a.TaskStateInputRequired {
		t.Fatalf("first turn ended %s", first.State())
	}
	if a := stored(t, p); a.Text(e2a.DeltaText) != up.AskChunk {
		t.Fatalf("first turn's text %q", a.Text(e2a.DeltaText))
	}
	ans := userMessage("Ada")
	ans.TaskID, ans.ContextID = first.Task.TaskID, first.Task.ContextID
	second := up.Collect(t, c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: ans}), nil)
	a := stored(t, p)
	if got := a.Text(e2a.DeltaText); got != up.AskReply("Ada") || second.State() != a2a.TaskStateCompleted {
		t.Errorf("the second turn's answer: %s %q, want %q (not the first turn's %q again)",
			second.State(), got, up.AskReply("Ada"), up.AskChunk)
	}
	if got := second.Text(up.AskArtifact); got != "" {
		t.Errorf("the second turn's client got the first turn's artifact again: %q", got)
	}
	return second
}

// TestPolledContinuationAnswersOnlyItsTurn: an agent that does not stream
// answers every SendMessage (returnImmediately) and GetTask of a
// continuation with the task as a whole, the earlier turn's artifact too;
// the continuation writes only what the task got beyond what it held
// before the message (read with GetTask before it is sent).
func TestPolledContinuationAnswersOnlyItsTurn(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, NoStreaming: true})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	askThenAnswer(t, p)
}

// TestJSContinuationAnswersOnlyItsTurn: @a2a-js/sdk opens a follow-up
// turn's stream with the stored task, the earlier turn's artifact in it;
// the continuation writes none of it.
func TestJSContinuationAnswersOnlyItsTurn(t *testing.T) {
	t.Parallel()
	srv := jsupstream.Start(t, jsupstream.Options{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	askThenAnswer(t, p)
}

// TestResumedContinuationAnswersOnlyItsTurn: the stream of a continuation
// is cut after its first event (the task named, no frame written); the
// retry follows the task (SubscribeToTask), whose first event is the task
// as a whole, the earlier turn's artifact too. The earlier turn's stored
// frames (the thread's request that recorded the same upstream task) say
// what the task held before: only the second turn's answer is written.
func TestResumedContinuationAnswersOnlyItsTurn(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", cutProxy(t, srv.BaseURL(), []byte(`"Ada"`)))
	askThenAnswer(t, p)
	if n := len(srv.CallsOf("SubscribeToTask")); n == 0 {
		t.Error("the continuation was not resumed (no SubscribeToTask): the test did not cut its stream")
	}
}

// cutProxy is a proxy of the A2A agent at base, whose card names the
// proxy: the first call whose body holds match gets its answer cut after
// its first server-sent event (the connection dropped).
func cutProxy(t *testing.T, base string, match []byte) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var cut atomic.Bool
	var self string
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		switch {
		case r.Request.Header.Get("X-Test-Cut") != "":
			r.Body = &firstEvent{rc: r.Body}
		case r.Request.Method == http.MethodGet:
			b, err := io.ReadAll(r.Body)
			_ = r.Body.Close()
			if err != nil {
				return err
			}
			b = bytes.ReplaceAll(b, []byte(base), []byte(self))
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, match) && cut.CompareAndSwap(false, true) {
			r.Header.Set("X-Test-Cut", "1")
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	self = srv.URL
	return self
}

// firstEvent passes a body through until the end of its first
// server-sent event, then fails.
type firstEvent struct {
	rc   io.ReadCloser
	seen []byte
	done bool
}

func (f *firstEvent) Read(p []byte) (int, error) {
	if f.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := f.rc.Read(p)
	if i := bytes.Index(append(f.seen, p[:n]...), []byte("\n\n")); i >= 0 {
		f.done = true
		return i + 2 - len(f.seen), nil
	}
	f.seen = append(f.seen, p[:n]...)
	return n, err
}

func (f *firstEvent) Close() error { return f.rc.Close() }

// asker is an agent whose task asks for more (input-required) at every
// message but "last", each turn's answer an artifact of its own
// ("a-<message>").
type asker struct{}

func (asker) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	text := up.TextOf(ec.Message.Parts)
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		state := a2a.TaskStateInputRequired
		if text == "last" {
			state = a2a.TaskStateCompleted
		}
		art := a2a.NewArtifactUpdateEvent(ec, a2a.ArtifactID("a-"+text), a2a.NewTextPart(text))
		art.Append, art.LastChunk = false, true
		_ = yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) &&
			yield(art, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, state, nil), nil)
	}
}

func (asker) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestResumedLongContinuationAnswersOnlyItsTurn: as
// TestResumedContinuationAnswersOnlyItsTurn, for a task whose sixth turn
// is resumed (its stream cut after the first event, the retry follows the
// task). The thread keeps only its last bridge.MaxThreadTurns (4)
// requests, whose stored frames hold turns three to five's answers; the
// turn's baseline recorded with its upstream task (bridge.Thread.Baseline)
// says what the task held before it: the artifacts of turns one and two,
// which the task snapshot holds, are not taken for the sixth turn's
// answer and written again.
func TestResumedLongContinuationAnswersOnlyItsTurn(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, asker{})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", cutProxy(t, url, []byte(`"last"`)))
	c := v1Client(t, p, "agent")
	var task a2a.TaskInfo
	for i, text := range []string{"t1", "t2", "t3", "t4", "t5", "last"} {
		m := userMessage(text)
		if task.TaskID != "" {
			m.TaskID, m.ContextID = task.TaskID, task.ContextID
		}
		turn := up.Collect(t, c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: m}), nil)
		want := a2a.TaskStateInputRequired
		if text == "last" {
			want = a2a.TaskStateCompleted
		}
		if turn.State() != want {
			t.Fatalf("turn %d ended %s, want %s", i+1, turn.State(), want)
		}
		if task.TaskID == "" {
			task = turn.Task
		}
		if text == "last" {
			if got := stored(t, p).Text(e2a.DeltaText); got != "last" {
				t.Errorf("the resumed sixth turn's stored answer %q, want its own %q (not earlier turns' artifacts again)", got, "last")
			}
			for _, old := range []string{"t1", "t2"} {
				if got := turn.Text(a2a.ArtifactID("a-" + old)); got != "" {
					t.Errorf("the sixth turn's client got turn %s's artifact again: %q", old, got)
				}
			}
		}
	}
}

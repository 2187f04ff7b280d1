package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// testEnv is an embedded JetStream server with the two streams egress
// reads, and a connection to it.
type testEnv struct {
	srv *streams.Embedded
	nc  *nats.Conn
	js  jetstream.JetStream
	bg  sync.WaitGroup
}

type envOpts struct {
	noRepublish bool
	maxPayload  int32 // the server's max_payload (0: the default, 1 MiB)
}

func startEnv(t testing.TB, o ...envOpts) *testEnv {
	t.Helper()
	var eo envOpts
	if len(o) > 0 {
		eo = o[0]
	}
	var so []natstest.Option
	if eo.maxPayload > 0 {
		so = append(so, natstest.WithMaxPayload(eo.maxPayload))
	}
	srv, nc := natstest.RunServer(t, so...)
	js := natstest.JetStream(t, nc)
	if eo.noRepublish {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cfg := natstest.Config().ResponsesStreamConfig()
		cfg.RePublish = nil
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	e := &testEnv{srv: srv, nc: nc, js: js}
	// Runs before the server's cleanups (registered earlier): writers
	// still waiting for their last acknowledgement finish first.
	t.Cleanup(e.bg.Wait)
	return e
}

// async runs fn in a goroutine the test waits for before the server stops.
func (e *testEnv) async(fn func()) {
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		fn()
	}()
}

// whenLive runs fn in a goroutine (as async) once a reader of request id
// has subscribed to its live subject, so that fn's frames arrive while the
// reader is open. It gives up after 10 s and runs fn anyway: the reader
// then finds the frames stored, and the test sees whatever that breaks.
func (e *testEnv) whenLive(id string, fn func()) {
	subj, _ := subjects.Live(id)
	acc := e.srv.Server().GlobalAccount()
	e.async(func() {
		testkit.Until(10*time.Second, func() bool { return acc.SubscriptionInterest(subj) })
		fn()
	})
}

// waiting returns a reader option that closes the returned channel when
// the reader first waits for a frame (its heartbeat, every millisecond
// from the start of the wait): everything stored was read by then.
func waiting() (ReplayOption, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return WithHeartbeat(time.Millisecond, func() error { once.Do(func() { close(ch) }); return nil }), ch
}

// conn opens another connection to the server.
func (e *testEnv) conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := e.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// submit publishes an envelope for requestID on agent pool "demo".
func (e *testEnv) submit(t testing.TB, env *e2a.Envelope) {
	t.Helper()
	natstest.PublishRequest(t, e.js, "demo", env)
}

// writer publishes the frames of one request the way the agent SDK does:
// fenced by the expected last subject sequence, deduplicated by msg id.
type writer struct {
	t       testing.TB
	js      jetstream.JetStream
	env     *e2a.Envelope
	mu      sync.Mutex
	seq     int64
	lastSeq uint64
	clock   time.Time
}

// running submits a new request with id and returns the writer of its
// frames.
func (e *testEnv) running(t testing.TB, id string) *writer {
	env := newEnvelope(id)
	e.submit(t, env)
	return e.writer(t, env)
}

func (e *testEnv) writer(t testing.TB, env *e2a.Envelope) *writer {
	return &writer{t: t, js: e.js, env: env, clock: time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC)}
}

// frame builds frame w.seq of the given kind.
func (w *writer) frame(kind string, final bool, status string, body any) *e2a.Response {
	r := e2a.ResponseFor(w.env)
	r.ResponseID = fmt.Sprintf("r%d", w.seq+1)
	r.Sequence = w.seq
	r.IsFinal = final
	r.Status = status
	r.ResponseKind = kind
	r.Timestamp = e2a.FormatTime(w.clock.Add(time.Duration(w.seq) * time.Second))
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	r.Body = e2a.MarshalBody(body)
	return &r
}

func (w *writer) publish(r *e2a.Response) {
	w.t.Helper()
	subj, err := subjects.Response(w.env.RequestID)
	if err != nil {
		w.t.Fatal(err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		w.t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(subjects.HeaderRequestID, w.env.RequestID)
	m.Header.Set(subjects.HeaderSequence, strconv.FormatInt(r.Sequence, 10))
	seq, err := publishFenced(w.js, m, subjects.FrameMsgID(w.env.RequestID, r.Sequence), w.lastSeq)
	if err != nil {
		w.t.Errorf("publish frame %d: %v", r.Sequence, err)
		return
	}
	w.lastSeq = seq
	w.seq++
}

// publishFenced publishes m expecting expected as its subject's last stream
// sequence, as the agent's writer does: on a replicated stream the server
// also refuses it while an earlier attempt of the same frame (retried by
// the client after no responders, a leader change) is being proposed, so a
// refusal is checked against the leader's last message: the frame itself
// (an earlier attempt landed) is success, an unchanged subject is tried
// again, anything else is the error.
func publishFenced(js jetstream.JetStream, m *nats.Msg, msgID string, expected uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(expected))
		if err == nil {
			return ack.Sequence, nil
		}
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || (apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence &&
			apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, err
		}
		last, lerr := streams.LeaderLastBySubject(ctx, js.Conn(), DefaultResponsesStream, m.Subject)
		switch {
		case lerr == nil && bytes.Equal(last.Data, m.Data):
			return last.Seq, nil
		case lerr == nil && last.Seq == expected, errors.Is(lerr, streams.ErrNoMessages) && expected == 0:
			// A proposal in flight: try again.
		case lerr != nil:
			return 0, fmt.Errorf("%w (then reading the last frame: %v)", err, lerr)
		default:
			return 0, fmt.Errorf("%w (the subject's last message is at %d)", err, last.Seq)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (w *writer) text(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publish(w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: s}))
}

func (w *writer) chunk(kind string, delta any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publish(w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: kind, Delta: delta}))
}

func (w *writer) complete(result any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publish(w.frame(e2a.KindComplete, true, e2a.StatusSucceeded, e2a.CompleteBody{Result: result}))
}

func (w *writer) fail(code, msg string, retryable bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publish(w.frame(e2a.KindError, true, e2a.StatusFailed, e2a.ErrorBody{Code: code, Message: msg, Retryable: retryable}))
}

func (w *writer) raw(r *e2a.Response) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.Sequence = w.seq
	w.publish(r)
}

func newEnvelope(id string) *e2a.Envelope {
	return &e2a.Envelope{
		ProtocolVersion: "1.0",
		RequestID:       id,
		SessionID:       "sess_xyz",
		Channel:         "web",
		Method:          "chat.send",
		IsStream:        true,
		Timestamp:       "2026-03-28T12:00:00+00:00",
		IdentityOrigin:  e2a.IdentityUser,
		UserID:          "u_001",
		Params:          map[string]any{"content": "Hello"},
		Provenance:      &e2a.Provenance{SourceProtocol: e2a.SourceE2A},
	}
}

// finished submits a request and writes n text chunks and a complete frame.
func (e *testEnv) finished(t testing.TB, id string, n int) *writer {
	env := newEnvelope(id)
	e.submit(t, env)
	w := e.writer(t, env)
	for i := 0; i < n; i++ {
		w.text(fmt.Sprintf("t%d ", i))
	}
	w.complete(map[string]any{"content": "done"})
	return w
}

// collect replays a request and checks the frame invariants from `from`.
func collect(t testing.TB, ctx context.Context, nc *nats.Conn, id string, from int64, opts ...ReplayOption) ([]render.Frame, error) {
	t.Helper()
	var out []render.Frame
	err := Replay(ctx, nc, id, from, func(f render.Frame) error {
		out = append(out, f)
		return nil
	}, opts...)
	return out, err
}

func checkSeq(t testing.TB, frames []render.Frame, from int64, wantFinal bool) {
	t.Helper()
	for i, f := range frames {
		if f.Response.Sequence != from+int64(i) {
			t.Fatalf("frame %d has sequence %d, want %d", i, f.Response.Sequence, from+int64(i))
		}
		if f.Response.IsFinal != (wantFinal && i == len(frames)-1) {
			t.Fatalf("frame %d is_final=%v", i, f.Response.IsFinal)
		}
	}
}

// readChecked reads r to its final frame, checking that every frame comes
// once, in order (e2a.SequenceChecker), calls each (when not nil) with
// each, and returns how many it read.
func readChecked(t testing.TB, ctx context.Context, r *Reader, each func(f render.Frame)) int64 {
	t.Helper()
	var c e2a.SequenceChecker
	for !c.Done() {
		f, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v", c.Next(), err)
		}
		if err := c.Add(f.Response); err != nil {
			t.Fatal(err)
		}
		if each != nil {
			each(f)
		}
	}
	return c.Next()
}

func decodeJSON(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

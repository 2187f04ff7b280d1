package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const smallPayload = 64 << 10

// startSmallServer is startServer with a server whose max_payload is 64 KiB.
func startSmallServer(t *testing.T) *server {
	t.Helper()
	e, nc := natstest.RunServer(t, natstest.WithConfig(testConfig()), natstest.WithMaxPayload(smallPayload))
	return &server{e: e, nc: nc, js: natstest.JetStream(t, nc)}
}

// followFrames subscribes to the live frames of id (before the request is
// published) and returns a function that waits for them up to the final
// one, and the size (headers included) of each frame as stored.
func followFrames(t *testing.T, nc *nats.Conn, id string) func() ([]*e2a.Response, []int64) {
	t.Helper()
	subj, err := subjects.Live(id)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(subj, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() ([]*e2a.Response, []int64) {
		t.Helper()
		defer sub.Unsubscribe()
		var frames []*e2a.Response
		var sizes []int64
		timeout := time.After(30 * time.Second)
		for {
			select {
			case m := <-ch:
				burst := msgFrames(t, m.Header, m.Data)
				// The size as published: republishing adds the stream's
				// headers. Each frame of a burst gets its message's.
				h := nats.Header{}
				for k, v := range m.Header {
					if !strings.HasPrefix(k, "Nats-") {
						h[k] = v
					}
				}
				h.Set("Nats-Msg-Id", subjects.FrameMsgID(id, burst[0].Sequence))
				h.Set("Nats-Expected-Last-Subject-Sequence", m.Header.Get("Nats-Last-Sequence"))
				size := streams.MessageSize(&nats.Msg{Header: h, Data: m.Data})
				for range burst {
					sizes = append(sizes, size)
				}
				frames = append(frames, burst...)
				if r := burst[len(burst)-1]; r.IsFinal {
					if err := e2a.CheckFrames(frames); err != nil {
						t.Fatalf("frames of %s: %v", id, err)
					}
					return frames, sizes
				}
			case <-timeout:
				t.Fatalf("request %s: no final frame (%d frames)", id, len(frames))
			}
		}
	}
}

// A frame too large for the server is refused at once with
// ErrFrameTooLarge (nothing published, the writer still usable), and a
// handler that returns the error ends the request with a final e2a.error
// frame_too_large: no retry, no redelivery.
func TestFrameTooLargeIsRefusedAtOnce(t *testing.T) {
	s := startSmallServer(t)
	type result struct {
		chunkErr, okErr, completeErr error
		elapsed                      time.Duration
	}
	results := make(chan result, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		var r result
		start := time.Now()
		// A tool delta is never split.
		r.chunkErr = w.Chunk(e2a.DeltaTool, map[string]any{"blob": strings.Repeat("x", smallPayload)})
		r.elapsed = time.Since(start)
		r.okErr = w.Chunk(e2a.DeltaText, "still writing")
		r.completeErr = w.Complete(map[string]any{"blob": strings.Repeat("y", 2*smallPayload)})
		results <- r
		return r.completeErr
	})
	// With a publish timeout of an hour, a frame retried until the timeout
	// would hang the test.
	var logs testkit.Buffer
	w := startWorker(t, s.nc, "big", h, agent.WithPublishTimeout(time.Hour),
		agent.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	waitConsumer(t, s.js, "big")
	wait := followFrames(t, s.nc, "big-1")
	publish(t, s.js, "big", request("big-1", nil))
	frames, _ := wait()
	r := <-results
	var ae *agent.Error
	if !errors.Is(r.chunkErr, agent.ErrFrameTooLarge) || !errors.As(r.chunkErr, &ae) || ae.Code != e2a.ErrCodeFrameTooLarge || ae.Retryable {
		t.Fatalf("too large chunk: %v (%+v)", r.chunkErr, ae)
	}
	if r.okErr != nil || !errors.Is(r.completeErr, agent.ErrFrameTooLarge) {
		t.Fatalf("after the refusal: chunk %v, complete %v", r.okErr, r.completeErr)
	}
	if r.elapsed > 5*time.Second {
		t.Fatalf("refusal took %v", r.elapsed)
	}
	if len(frames) != 2 || text(t, frames) != "still writing" {
		t.Fatalf("frames %+v", frames)
	}
	// The refusal is in the worker's log with its request (the client's
	// frame_too_large names no worker; it was logged nowhere).
	if l := logs.String(); !strings.Contains(l, "max_payload") || !strings.Contains(l, "request_id=big-1") {
		t.Errorf("the refused frame is not logged with its request:\n%s", l)
	}
	eb, err := frames[1].Error()
	if err != nil || eb.Code != e2a.ErrCodeFrameTooLarge || eb.Retryable || frames[1].Status != e2a.StatusFailed {
		t.Fatalf("final frame %+v %v", frames[1], err)
	}
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	// Acknowledged once, never redelivered. The ack is a publish the
	// consumer takes in its own time: waited for (a stop that waited for
	// its pull gave it that time; one that does not saw "ack pending 1").
	name, _ := streams.AgentConsumerName("big")
	c, err := s.js.Consumer(tctx(t), streams.RequestsStream, name)
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	testkit.Eventually(t, 10*time.Second, "the request acknowledged", func() bool {
		info, err = c.Info(tctx(t))
		return err == nil && info.NumAckPending == 0
	})
	if info.NumAckPending != 0 || info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		t.Fatalf("consumer: ack pending %d, redelivered %d, delivered %d", info.NumAckPending, info.NumRedelivered, info.Delivered.Consumer)
	}
	t.Logf("refused in %v", r.elapsed)
}

// A handler's final frame that cannot fit (an *agent.Error with huge
// details) becomes e2a.error frame_too_large instead of being retried.
func TestFinalFrameTooLargeEndsTheRequest(t *testing.T) {
	s := startSmallServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return &agent.Error{Code: "oops", Message: "failed", Details: map[string]any{"dump": strings.Repeat("z", smallPayload)}}
	})
	startWorker(t, s.nc, "fin", h, agent.WithPublishTimeout(time.Hour))
	waitConsumer(t, s.js, "fin")
	wait := followFrames(t, s.nc, "fin-1")
	publish(t, s.js, "fin", request("fin-1", nil))
	frames, _ := wait()
	eb, err := frames[len(frames)-1].Error()
	if len(frames) != 1 || err != nil || eb.Code != e2a.ErrCodeFrameTooLarge {
		t.Fatalf("frames %+v (%v)", frames, err)
	}
}

// publishRawRequest stores data, an envelope as an integrator may encode
// it, as request id of pool.
func publishRawRequest(t *testing.T, js jetstream.JetStream, pool, id string, env *e2a.Envelope) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // valid JSON: '<' as is
	if err := enc.Encode(env); err != nil {
		t.Fatal(err)
	}
	subj, err := subjects.Request(pool, id)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Data = bytes.TrimSpace(buf.Bytes())
	if _, err := js.PublishMsg(tctx(t), m); err != nil {
		t.Fatalf("publish %s (%d bytes): %v", id, len(m.Data), err)
	}
	return len(m.Data)
}

// A request that fits max_payload but whose echoed ids make every frame
// larger (12 KiB of '<' in correlation_id, which a frame encodes as
// \u003c, six times larger) still ends at its first delivery: its final
// frame keeps the request id and drops the other echoed ids. So does one
// whose deliveries all stall: the final e2a.error max_deliveries the
// advisory makes the pool write is refused the same way and written the
// same way.
func TestEchoedIDsTooLargeForAnyFrame(t *testing.T) {
	s := startSmallServer(t)
	var calls atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		if env.RequestID == "echo-stall" {
			<-ctx.Done()
			return nil
		}
		return w.Complete(nil) // refused (too large), returned: frame_too_large
	})
	startWorker(t, s.nc, "echo", h, agent.WithMaxDeliver(2), agent.WithAckWait(time.Second),
		agent.WithoutHeartbeats(), agent.WithDrainTimeout(time.Second), agent.WithLogger(slog.New(slog.DiscardHandler)))
	waitConsumer(t, s.js, "echo")
	corr := strings.Repeat("<", 12<<10)
	for _, id := range []string{"echo-1", "echo-stall"} {
		env := request(id, nil)
		env.CorrelationID, env.ContextID = corr, "ctx-"+id
		if n := publishRawRequest(t, s.js, "echo", id, env); 6*len(corr) < smallPayload || n > smallPayload/2 {
			t.Fatalf("request of %d bytes: not a request that fits while its frames do not", n)
		}
	}
	for _, c := range []struct{ id, code string }{
		{"echo-1", e2a.ErrCodeFrameTooLarge},
		{"echo-stall", e2a.ErrCodeMaxDeliveries},
	} {
		fr := waitFinal(t, s.nc, c.id, 10*time.Second)
		last := fr[len(fr)-1]
		e, _ := last.Error()
		if len(fr) != 1 || e.Code != c.code {
			t.Fatalf("%s: %d frames, final %+v; want e2a.error %s", c.id, len(fr), e, c.code)
		}
		if last.RequestID != c.id || last.CorrelationID != "" || last.ContextID != "" || last.Provenance.SourceProtocol != e2a.SourceE2A {
			t.Errorf("%s: final frame %+v; want the request id, no other echoed id", c.id, last)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("handler called %d times, want once for echo-1, twice (max deliver) for echo-stall", n)
	}
}

// Text and reasoning deltas larger than a frame can hold are split into
// frames that fit, and arrive whole and in order, with coalescing on and
// off.
func TestLargeTextDeltasAreSplit(t *testing.T) {
	s := startSmallServer(t)
	// Multi-byte characters, characters JSON escapes (six bytes each) and
	// plain text, in a delta three times max_payload.
	var b strings.Builder
	for b.Len() < 3*smallPayload {
		b.WriteString("plain text, é€😀 and <&> \n\t\"quoted\" \x01")
	}
	big := b.String()
	for _, tc := range []struct {
		name string
		opts []agent.Option
	}{
		{"coalesced", nil},
		{"not coalesced", []agent.Option{agent.WithCoalesce(0, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := strings.ReplaceAll(tc.name, " ", "_")
			errc := make(chan error, 1)
			h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
				err := errors.Join(
					w.Chunk(e2a.DeltaText, "start "),
					w.Chunk(e2a.DeltaText, big),
					w.Chunk(e2a.DeltaReasoning, big),
					w.Chunk(e2a.DeltaText, " end"))
				errc <- err
				if err != nil {
					return err
				}
				return w.Complete(nil)
			})
			startWorker(t, s.nc, pool, h, append([]agent.Option{agent.WithPublishTimeout(time.Hour)}, tc.opts...)...)
			waitConsumer(t, s.js, pool)
			id := pool + "-1"
			wait := followFrames(t, s.nc, id)
			publish(t, s.js, pool, request(id, nil))
			frames, sizes := wait()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if frames[len(frames)-1].ResponseKind != e2a.KindComplete {
				t.Fatalf("final %+v", frames[len(frames)-1])
			}
			if got := text(t, frames); got != "start "+big+" end" {
				t.Fatalf("text: %d bytes, want %d", len(got), len(big)+10)
			}
			var reasoning strings.Builder
			largest := int64(0)
			for i, f := range frames {
				largest = max(largest, sizes[i])
				if sizes[i] > smallPayload {
					t.Fatalf("frame %d is %d bytes", i, sizes[i])
				}
				if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaReasoning {
					reasoning.WriteString(c.Delta.(string))
				}
			}
			if reasoning.String() != big {
				t.Fatalf("reasoning: %d bytes, want %d", reasoning.Len(), len(big))
			}
			t.Logf("%d frames for 2×%d bytes of text; largest frame %d bytes (max_payload %d)", len(frames), len(big), largest, smallPayload)
		})
	}
}

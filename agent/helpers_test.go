package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// server is an embedded JetStream server with the pipeline's streams.
type server struct {
	e  *streams.Embedded
	nc *nats.Conn
	js jetstream.JetStream
}

// testConfig is natstest's configuration on memory storage (faster; the
// cluster tests use file storage).
func testConfig() streams.Config {
	c := natstest.Config()
	c.Storage = jetstream.MemoryStorage
	return c
}

func startServer(t testing.TB) *server {
	t.Helper()
	e, nc := natstest.RunServer(t, natstest.WithConfig(testConfig()))
	return &server{e: e, nc: nc, js: natstest.JetStream(t, nc)}
}

func (s *server) connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.e.ClientURL(), append([]nats.Option{nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func tctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// request is an envelope for tests.
func request(id string, params map[string]any) *e2a.Envelope {
	return &e2a.Envelope{
		ProtocolVersion: e2a.ProtocolVersion,
		RequestID:       id,
		Method:          "chat.send",
		IsStream:        true,
		Params:          params,
		Provenance:      &e2a.Provenance{SourceProtocol: e2a.SourceE2A},
	}
}

// publish stores env as a request for pool, with the extra headers given
// as name, value pairs.
func publish(t testing.TB, js jetstream.JetStream, pool string, env *e2a.Envelope, headers ...string) {
	t.Helper()
	natstest.PublishRequest(t, js, pool, env, headers...)
}

// storedFrames reads every frame of a request.
func storedFrames(t testing.TB, nc *nats.Conn, id string) ([]*e2a.Response, []streams.RawMsg) {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	// Short attempts, retried: a request in flight to a node that dies is
	// never answered.
	var msgs []streams.RawMsg
	testkit.Eventually(t, 30*time.Second, "the frames of "+id+" read", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		msgs, err = streams.DirectGetAll(ctx, nc, streams.ResponsesStream, subj, 0, 256)
		cancel()
		return err == nil || errors.Is(err, streams.ErrNoMessages)
	})
	if err != nil {
		return nil, nil
	}
	out := make([]*e2a.Response, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, msgFrames(t, m.Header, m.Data)...)
	}
	return out, msgs
}

// waitFinal waits for the final frame of a request and returns the frames,
// checked with e2a.CheckFrames.
func waitFinal(t testing.TB, nc *nats.Conn, id string, d time.Duration) []*e2a.Response {
	t.Helper()
	var fr []*e2a.Response
	testkit.Eventually(t, d, "the final frame of "+id, func() bool {
		fr, _ = storedFrames(t, nc, id)
		return len(fr) > 0 && fr[len(fr)-1].IsFinal
	})
	if err := e2a.CheckFrames(fr); err != nil {
		t.Fatalf("frames of %s: %v", id, err)
	}
	return fr
}

// worker runs agent.Run in the background.
type worker struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startWorker(t testing.TB, nc *nats.Conn, pool string, h agent.Handler, opts ...agent.Option) *worker {
	t.Helper()
	return startWorkerWith(t, nc, pool, func(ctx context.Context, opts ...agent.Option) error {
		return agent.Run(ctx, nc, pool, h, opts...)
	}, opts...)
}

// startWorkerWith is startWorker with run in place of agent.Run (its
// variants for tests).
func startWorkerWith(t testing.TB, nc *nats.Conn, pool string, run func(context.Context, ...agent.Option) error, opts ...agent.Option) *worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{cancel: cancel, done: make(chan error, 1)}
	opts = append([]agent.Option{agent.WithFetchWait(200 * time.Millisecond)}, opts...)
	go func() {
		err := run(ctx, opts...)
		if err != nil && ctx.Err() == nil && !nc.IsClosed() {
			t.Errorf("Run(%s) returned early: %v", pool, err)
		}
		w.done <- err
	}()
	t.Cleanup(func() { _ = w.stop() })
	return w
}

// stop cancels the worker and waits for Run to return.
func (w *worker) stop() error {
	w.once.Do(func() {
		w.cancel()
		select {
		case w.err = <-w.done:
		case <-time.After(30 * time.Second):
			w.err = errors.New("Run did not return")
		}
	})
	return w.err
}

// maxDeliveriesAdvisory is the subject of the max-deliveries advisory of
// pool's consumer.
func maxDeliveriesAdvisory(pool string) string {
	consumer, _ := streams.AgentConsumerName(pool)
	return subjects.MaxDeliveriesAdvisory(streams.RequestsStream, consumer)
}

// startPoisoned runs a worker of pool (opts) on a connection of its own
// until it has picked up request id, then kills it in it (the connection
// closed: nothing acked, nacked or written), as a poison request kills a
// pool's one worker. It returns its handler, which holds every request
// until its context ends, for the worker started next.
func startPoisoned(t testing.TB, s *server, pool, id string, opts ...agent.Option) agent.Handler {
	t.Helper()
	picked := make(chan struct{}, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		select {
		case picked <- struct{}{}:
		default:
		}
		<-ctx.Done() // the poison request: the process dies in it
		return ctx.Err()
	})
	nc := s.connect(t)
	startWorker(t, nc, pool, h, opts...)
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request(id, nil))
	testkit.Receive(t, picked, 10*time.Second, "no pick-up")
	nc.Close()
	return h
}

// runHold holds a piece of Run's work (hold) until Run has returned or,
// Run waiting for it, for a second: held past Run's return is the defect a
// "Run awaits" test finds, whatever the time Run takes.
type runHold struct {
	entered, done, returned chan struct{}
	pastRun                 bool
}

func newRunHold() *runHold {
	return &runHold{entered: make(chan struct{}), done: make(chan struct{}), returned: make(chan struct{})}
}

// hold is the held work; it is to run once.
func (h *runHold) hold() {
	defer close(h.done)
	close(h.entered)
	select {
	case <-h.returned:
		h.pastRun = true
	case <-time.After(time.Second):
	}
}

// check waits for request id's final frame, stops wk and fails the test
// when what was held past Run's return.
func (h *runHold) check(t testing.TB, s *server, id string, wk *worker, what string) {
	t.Helper()
	waitFinal(t, s.nc, id, 10*time.Second)
	if err := wk.stop(); err != nil {
		t.Fatal(err)
	}
	close(h.returned)
	testkit.Receive(t, h.done, 10*time.Second, "the held work did not end")
	if h.pastRun {
		t.Fatalf("Run returned while %s", what)
	}
}

// waitConsumer waits until the pool's consumer exists (Run provisioned it)
// and returns it.
func waitConsumer(t testing.TB, js jetstream.JetStream, pool string) jetstream.Consumer {
	t.Helper()
	return poolConsumer(t, js, pool, "consumer", nil)
}

// waitNoPull waits until the pool's consumer holds no pull request: the
// server has seen a closed worker's connection go. Run returns as soon as
// its connection closes, before the server may notice; a request
// published meanwhile goes to the dead pull and comes back only after the
// ack wait, as a redelivery.
func waitNoPull(t testing.TB, js jetstream.JetStream, pool string) {
	t.Helper()
	poolConsumer(t, js, pool, "no pull on consumer", func(info *jetstream.ConsumerInfo) bool { return info.NumWaiting == 0 })
}

// poolConsumer waits until the pool's consumer exists and, with until, its
// info satisfies until (what names the wait), and returns the consumer.
func poolConsumer(t testing.TB, js jetstream.JetStream, pool, what string, until func(*jetstream.ConsumerInfo) bool) jetstream.Consumer {
	t.Helper()
	name, _ := streams.AgentConsumerName(pool)
	var c jetstream.Consumer
	testkit.Eventually(t, 30*time.Second, what+" "+name, func() bool {
		// Short attempts: a clustered consumer without a leader yet may leave
		// an info request unanswered.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		if c, err = js.Consumer(ctx, streams.RequestsStream, name); err != nil || until == nil {
			return err == nil
		}
		info, err := c.Info(ctx)
		return err == nil && until(info)
	})
	return c
}

// counter reads a counter or gauge value from a registry.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

// text joins the text deltas of frames.
func text(t testing.TB, frames []*e2a.Response) string {
	t.Helper()
	var s string
	for _, f := range frames {
		if f.ResponseKind != e2a.KindChunk {
			continue
		}
		c, err := f.Chunk()
		if err != nil {
			t.Fatal(err)
		}
		if c.DeltaKind == e2a.DeltaText {
			s += c.Delta.(string)
		}
	}
	return s
}

// msgFrames decodes the frames of a stored or live response message: one
// frame, or a burst.
func msgFrames(t testing.TB, h nats.Header, data []byte) []*e2a.Response {
	t.Helper()
	fr, err := e2a.BurstResponses(h.Get(subjects.HeaderFrames), data)
	if err != nil {
		t.Fatalf("response message: %v", err)
	}
	return fr
}

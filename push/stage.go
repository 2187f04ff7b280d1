package push

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// stage is one replica of the delivery stage.
type stage struct {
	// id names this replica in the cursors of the configs it drains
	// (cursor.Drainer).
	id      string
	nc      *nats.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	getter  *streams.DirectGetter
	o       options
	log     *slog.Logger
	client  *http.Client
	metrics *metrics
	ctx     context.Context
	// shares count the dead letters of principals near their share of
	// E2A_PUSH_DEAD (deadshare.go).
	shares deadShares
	// beforePurge, when set (tests), runs before a purge of principal's
	// oldest dead letters.
	beforePurge func(ctx context.Context, principal string)

	// Read and written by the consumer's callback only.
	requests requestCache
	mappers  map[string]*mapState
	// mappersOf is the stream (epoch) whose sequences the mappers were
	// fed up to: a stream made again starts them again.
	mappersOf int64

	mu    sync.Mutex
	lanes map[string]*lane
	jobs  sync.WaitGroup

	// rendered are the messages rendered and not settled yet, by stream
	// sequence (renderedCache).
	rendered renderedCache

	// epoch is the E2A_RESPONSES the stage reads: its creation time (Unix
	// nanoseconds), read once the consumer is bound (bindConsumer), again
	// when a config or cursor names a newer one (refreshEpoch). Never
	// goes back to an older stream.
	epoch atomic.Int64
	// restored is the newest stream refreshEpoch read, with its restore
	// point (epochAt).
	restored atomic.Pointer[streamEpoch]
}

// refreshEpoch reads which E2A_RESPONSES the stage reads (stage.epoch)
// and, for a newer one, where the messages restored into it end
// (stage.restored, set first: epochAt finds it for the new epoch).
func (s *stage) refreshEpoch(ctx context.Context) error {
	st, err := s.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		return err
	}
	created := st.CachedInfo().Created.UnixNano()
	if created <= s.epoch.Load() {
		return nil
	}
	e, err := s.epochOf(ctx, st.CachedInfo())
	if err != nil {
		return err
	}
	s.keepEpoch(e)
	for {
		old := s.epoch.Load()
		if created <= old || s.epoch.CompareAndSwap(old, created) {
			return nil
		}
	}
}

// keepEpoch keeps e as the stream the stage knows (stage.restored,
// epochAt) unless it knows a newer one.
func (s *stage) keepEpoch(e streamEpoch) {
	for {
		old := s.restored.Load()
		if old != nil && old.at >= e.at || s.restored.CompareAndSwap(old, &e) {
			return
		}
	}
}

// Run runs one replica of the push delivery stage on nc until ctx is done.
// It binds E2A_PUSH and E2A_PUSH_DEAD (creating them with the options'
// streams.Config when missing), creates or updates the durable consumer
// (WithConsumerName, default "push") on E2A_RESPONSES for e2a.resp.*,
// starting, when it is first made, after the last response message
// stored before the oldest stored config was made, and delivers every
// task update of a task with configs to each of its configs' webhooks:
// in the task's order per config, at least once, retried with backoff for
// the retry window, then dead-lettered. A config that cannot take a
// message now is parked and drained later through a second durable
// consumer (<name>-wake, on the bucket's wake.> keys; see park.go), so a
// failing webhook holds none of the consumer's messages. Replicas sharing
// the consumers split the work. Streams and consumers that cannot be
// bound yet (a cluster electing their leaders, under load or starting,
// streams not applied yet) are tried again with a backoff, each failure
// logged, as the agent runtime does; a consumer deleted under the stage is
// bound again the same way (rebind.go). It returns nil when ctx is done, an
// error when the options are invalid or the connection is closed under it
// (nats.ErrConnectionClosed).
func Run(ctx context.Context, nc *nats.Conn, opts ...Option) error {
	if nc == nil {
		return fmt.Errorf("%w: nil connection", ErrInvalidOption)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return err
	}
	m, err := newMetrics(o.registerer)
	if err != nil {
		return err
	}
	s, cons, wake, err := start(ctx, nc, o, m)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return err
	}
	defer s.getter.Close()
	main := &feed{stream: streams.ResponsesStream, name: o.consumer, bind: s.bindConsumer, handler: s.intake}
	wakes := &feed{stream: streams.KVStream(streams.PushBucket), name: s.wakeConsumer(), bind: s.bindWake, handler: s.wakeIntake}
	if err := s.consume(main, cons); err != nil {
		return err
	}
	if err := s.consume(wakes, wake); err != nil {
		main.cc.Stop()
		return err
	}
	s.log.Info("push stage started", "consumer", o.consumer, "retry_window", o.retryWindow)
	closed := s.waitStop(ctx, main, wakes)
	main.cc.Drain()
	wakes.cc.Drain()
	<-main.cc.Closed()
	<-wakes.cc.Closed()
	s.jobs.Wait()
	if closed {
		return fmt.Errorf("push: %w", nats.ErrConnectionClosed)
	}
	return nil
}

// waitStop waits until ctx is done (false) or the connection is closed
// under the stage (true: nothing can be read, acked or written any more),
// binding again meanwhile a consumer of the feeds that is gone (rebind).
func (s *stage) waitStop(ctx context.Context, main, wakes *feed) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			if s.nc.IsClosed() {
				return true
			}
		case cause := <-main.gone:
			s.rebind(ctx, main, cause)
		case cause := <-wakes.gone:
			s.rebind(ctx, wakes, cause)
		}
	}
}

// start opens the stage and binds its two consumers (bindOnce), again
// after a failure with a backoff from 100 ms to 5 s, until ctx is done or
// the connection is closed.
func start(ctx context.Context, nc *nats.Conn, o options, m *metrics) (*stage, jetstream.Consumer, jetstream.Consumer, error) {
	backoff := 100 * time.Millisecond
	for {
		s, cons, wake, err := bindOnce(ctx, nc, o, m)
		if err == nil || ctx.Err() != nil || nc.IsClosed() {
			return s, cons, wake, err
		}
		o.log.Warn("push: streams or consumers not available yet, retrying", "err", err, "wait", backoff)
		if sleepctx.Sleep(ctx, backoff) != nil {
			return nil, nil, nil, ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// bindOnce opens the stage (newStage) and binds its consumers once; on
// failure nothing is left open.
func bindOnce(ctx context.Context, nc *nats.Conn, o options, m *metrics) (*stage, jetstream.Consumer, jetstream.Consumer, error) {
	s, err := newStage(ctx, nc, o, m)
	if err != nil {
		return nil, nil, nil, err
	}
	cons, err := s.bindConsumer(ctx)
	if err != nil {
		s.getter.Close()
		return nil, nil, nil, fmt.Errorf("push: consumer %s: %w", o.consumer, err)
	}
	wake, err := s.bindWake(ctx)
	if err != nil {
		s.getter.Close()
		return nil, nil, nil, fmt.Errorf("push: consumer %s: %w", s.wakeConsumer(), err)
	}
	return s, cons, wake, nil
}

func newStage(ctx context.Context, nc *nats.Conn, o options, m *metrics) (*stage, error) {
	js, kv, err := openBucket(ctx, nc, o.streams)
	if err != nil {
		return nil, err
	}
	if err := bindDead(ctx, js, o.streams); err != nil {
		return nil, err
	}
	getter, err := streams.NewDirectGetter(nc)
	if err != nil {
		return nil, err
	}
	return &stage{id: rand.Text(), nc: nc, js: js, kv: kv, getter: getter, o: o, log: o.log, client: o.httpClient(),
		metrics: m, ctx: ctx, requests: requestCache{max: 10000}, mappers: map[string]*mapState{},
		lanes: map[string]*lane{}}, nil
}

// bindConsumer creates the durable consumer, or updates it keeping where
// it started. Made for the first time, it starts at the first response
// message any stored config may be waiting for (see startSeq), not at the
// next new one: a config made before the stage's first start (ingress
// stores configs whether the stage runs or not) would otherwise miss the
// frames stored in between, and its lane would wait for them for ever.
func (s *stage) bindConsumer(ctx context.Context) (jetstream.Consumer, error) {
	for range 3 {
		cfg := s.consumerConfig()
		c, err := s.js.Consumer(ctx, streams.ResponsesStream, s.o.consumer)
		switch {
		case err == nil:
			ci := c.CachedInfo().Config
			cfg.DeliverPolicy, cfg.OptStartSeq = ci.DeliverPolicy, ci.OptStartSeq
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			start, err := s.startSeq(ctx)
			if err != nil {
				return nil, err
			}
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
		default:
			return nil, err
		}
		c, err = s.js.CreateOrUpdateConsumer(ctx, streams.ResponsesStream, cfg)
		if err == nil {
			// Read after the consumer is made: a stream made again since
			// removed it, and the stage binds it again (rebind.go).
			return c, s.refreshEpoch(ctx)
		}
		if ctx.Err() != nil {
			return c, err
		}
		// Another replica made it first, from another start: bind to it.
		s.log.Info("push: consumer changed while binding; again", "err", err)
	}
	return nil, fmt.Errorf("the consumer changed under every attempt to bind it")
}

// startSeq is where a new consumer starts: after the last response
// message stored before any config was made (the smallest From of the
// stored configs; a From of another stream is its start: fromIn), or
// after the stream's last message when there is no config. The stream's
// last sequence is read before the configs, so a config made meanwhile
// has a From at least as large. A stream gone back under the configs
// (restored keeping its creation time) may hold messages stored since
// at sequences up to their From: the start is not after the first
// message stored after the oldest config's From was (Config.FromAt): one
// read of the stream's leader more, at the consumer's creation only,
// which in a stream that did not go back finds the message after that
// config's From or a later one.
func (s *stage) startSeq(ctx context.Context) (uint64, error) {
	st, err := s.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		return 0, err
	}
	epoch, err := s.epochOf(ctx, st.CachedInfo())
	if err != nil {
		return 0, err
	}
	s.keepEpoch(epoch) // read once: refreshEpoch finds it
	start, oldest := st.CachedInfo().State.LastSeq, int64(0)
	for raw, err := range streams.DirectGetSeq(ctx, s.nc, streams.KVStream(streams.PushBucket), "$KV."+streams.PushBucket+".cfg.>", 0, 256) {
		if err != nil {
			return 0, err
		}
		var tc taskConfigs
		if json.Unmarshal(raw.Data, &tc) != nil {
			continue // a delete marker
		}
		for _, c := range tc.Configs {
			start = min(start, c.fromIn(epoch))
			if c.Stream == epoch.at && c.FromAt != 0 && (oldest == 0 || c.FromAt < oldest) {
				oldest = c.FromAt
			}
		}
	}
	if oldest == 0 {
		return start + 1, nil
	}
	after, err := s.firstSince(ctx, time.Unix(0, oldest+1))
	switch {
	case errors.Is(err, streams.ErrNoMessages):
	case err != nil:
		return 0, fmt.Errorf("push: read where the configs of %s start: %w", streams.ResponsesStream, err)
	default:
		start = min(start, after.Seq-1)
	}
	return start + 1, nil
}

func (s *stage) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       s.o.consumer,
		Description:   "E2A push notification delivery",
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.o.ackWait,
		MaxDeliver:    -1,
		FilterSubject: subjects.AllResponseFrames,
		MaxAckPending: s.o.maxAckPending,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
}

// intake handles one response message, in the consumer's order: a
// message of no task with configs is acked at once; otherwise it is
// rendered and handed to the lane of each config, and settled when
// every lane is done with it.
func (s *stage) intake(msg jetstream.Msg) {
	if s.o.beforeIntake != nil {
		s.o.beforeIntake(msg)
	}
	if s.ctx.Err() != nil {
		_ = msg.Nak()
		return
	}
	job, err := s.prepare(msg)
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, errBehind) {
			level = slog.LevelDebug
		}
		s.log.Log(s.ctx, level, "push: cannot read a response message; retrying", "subject", msg.Subject(), "err", err)
		_ = msg.NakWithDelay(s.o.orderWait)
		return
	}
	if job == nil {
		_ = msg.Ack()
		if md, err := msg.Metadata(); err == nil {
			s.rendered.forget(md.Sequence.Stream)
		}
		return
	}
	s.jobs.Add(1)
	go job.settle(s)
	for _, c := range job.configs {
		s.enqueue(item{job: job, cfg: c.cfg, ref: c.ref})
	}
}

type jobConfig struct {
	cfg Config
	ref configRef
}

// prepare reads what intake needs: nil for a message to ack at once.
func (s *stage) prepare(msg jetstream.Msg) (*job, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	md, err := msg.Metadata()
	if err != nil {
		return nil, nil
	}
	requestID, err := subjects.ParseResponse(msg.Subject())
	if err != nil {
		return nil, nil
	}
	epoch := s.epoch.Load() // the stream msg is of (bound at most this recently)
	user, task := namedBy(msg.Headers(), msg.Data())
	r, err := s.requestOf(ctx, requestID, user, task)
	if err != nil || !r.found {
		return nil, err
	}
	held, err := s.configsOf(ctx, r)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	fs, ferr := frames(msg.Headers(), msg.Data())
	tasks := false
	var configs []jobConfig
	for _, h := range held {
		if ferr == nil && len(fs) > 0 && fs[0].Sequence == 0 {
			s.keepConfigs(ctx, h.key, h.tc, h.rev)
		}
		for _, c := range h.tc.Configs {
			if c.Stream > epoch && epoch != 0 {
				// Made after the stage last read the stream: the message
				// may be of a stream removed since (errOtherStream).
				return nil, errors.Join(errOtherStream, s.refreshEpoch(ctx))
			}
			if err := s.fromBack(ctx, c, epoch, md.Sequence.Stream, md.Timestamp.UnixNano()); err != nil {
				return nil, err
			}
			c.From = c.fromIn(s.epochAt(epoch))
			tasks = tasks || c.Version == V03
			configs = append(configs, jobConfig{cfg: c, ref: configRef{h.principal, r.taskID, c.ID}})
		}
	}
	if s.mappersOf != epoch {
		s.mappers, s.mappersOf = map[string]*mapState{}, epoch
	}
	m := s.rendered.get(md.Sequence.Stream, requestID, md.Timestamp, tasks)
	switch {
	case ferr != nil || len(fs) == 0:
		// No update to send, but the configs' cursors still pass it:
		// their next message is the one after it.
		s.log.Warn("push: undecodable response message skipped", "request_id", requestID, "seq", md.Sequence.Stream)
		m = &message{requestID: requestID, after: r.after, seq: md.Sequence.Stream, firstSeq: undecodableFirst(msg.Headers()),
			stored: md.Timestamp}
	case m == nil:
		m = &message{requestID: requestID, after: r.after, seq: md.Sequence.Stream,
			firstSeq: fs[0].Sequence, final: fs[len(fs)-1].IsFinal, stored: md.Timestamp}
		if err := s.render(ctx, s.mappers, r, m, fs, tasks); err != nil {
			delete(s.mappers, requestID)
			return nil, err
		}
		s.rendered.put(m, tasks)
	}
	if len(s.mappers) > 10000 {
		s.mappers = map[string]*mapState{}
	}
	return &job{msg: msg, m: m, epoch: epoch, done: make(chan result, len(configs)), n: len(configs), configs: configs,
		shared: md.NumDelivered > 1 || time.Since(md.Timestamp) >= s.o.ackWait/3}, nil
}

// heldConfigs are the configs of one principal's task, as stored under
// key at revision rev.
type heldConfigs struct {
	principal, key string
	tc             taskConfigs
	rev            uint64
}

// configsOf reads the configs that follow r's task: its principal's and,
// for a turn of another principal's conversation (an admin's answer or
// cancel of alice's task: e2a.Envelope.Owner), the owner's, whose task
// the turn is (tasks/get shows it to her). Keys without configs are left
// out.
func (s *stage) configsOf(ctx context.Context, r *request) ([]heldConfigs, error) {
	var out []heldConfigs
	for _, p := range r.principals() {
		key := taskKey(p, r.taskID)
		tc, rev, err := readConfigs(ctx, s.kv, key, s.o.sealer)
		if err != nil {
			return nil, err
		}
		if len(tc.Configs) > 0 {
			out = append(out, heldConfigs{principal: p, key: key, tc: tc, rev: rev})
		}
	}
	return out, nil
}

// keepConfigs writes the task's configs (key, at revision rev) again as
// a turn of the task starts (its first response message): the key's age
// in E2A_PUSH (streams.Config.TasksTTL) starts again, as the task
// record's does with each turn, so a config lives as long as its task.
// Cursors need nothing: each delivery writes its config's. (While a turn
// runs longer, the replica that published it writes both again:
// Store.Keep.) A change made
// meanwhile (a create, a delete) wrote the key itself, and a failure
// only leaves the age as it was: neither is an error.
func (s *stage) keepConfigs(ctx context.Context, key string, tc taskConfigs, rev uint64) {
	b, err := encodeConfigs(tc, key, s.o.sealer)
	if err != nil {
		return
	}
	if _, err := s.kv.Update(ctx, key, b, rev); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		s.log.Warn("push: cannot renew a task's configs", "err", err)
	}
}

// result is a lane's verdict on a message: done, or look again after
// retry. Parked: done, handed to the config's backlog (park.go).
type result struct {
	retry  bool
	after  time.Duration
	parked bool
}

// job is a message being delivered to its configs.
type job struct {
	msg     jetstream.Msg
	header  nats.Header // a drain's: the stored message's headers (msg is nil)
	m       *message
	epoch   int64 // the E2A_RESPONSES m is of (stage.epoch)
	configs []jobConfig
	n       int
	done    chan result
	// shared: another replica may hold msg too, so each of its POSTs is
	// claimed in the cursor first (cursor.Poster). A message the consumer
	// delivered before (NumDelivered > 1), or stored a third of the ack
	// wait or more before intake took it: maybe delivered that long ago
	// (a delivery comes after the store), its ack wait may run out
	// before settle's first InProgress (a third of the ack wait after
	// intake), and the consumer give it to another replica while this
	// one still holds it (it waited in the client's pull buffer, behind
	// a slow intake). Any other message was delivered less than a third
	// of the ack wait before intake: it is this replica's alone while
	// the replica is alive, settle keeping it in progress before its ack
	// wait can run out.
	shared bool
}

// settle acks the message once every lane is done with it, or naks it
// with the shortest delay a lane asked for; it keeps the message in
// progress meanwhile.
func (j *job) settle(s *stage) {
	defer s.jobs.Done()
	tick := time.NewTicker(s.o.ackWait / 3)
	defer tick.Stop()
	var retry, parked bool
	var after time.Duration
	if j.shared {
		// Its ack wait may be near its end already.
		_ = j.msg.InProgress()
	}
	for got := 0; got < j.n; {
		select {
		case r := <-j.done:
			got++
			parked = parked || r.parked
			if r.retry && (!retry || r.after < after) {
				retry, after = true, r.after
			}
		case <-tick.C:
			_ = j.msg.InProgress()
		}
	}
	if !retry {
		_ = j.msg.Ack()
		if !parked {
			// A parked config's drain may read it from the cache.
			s.rendered.forget(j.m.seq)
		}
		return
	}
	_ = j.msg.NakWithDelay(max(after, time.Millisecond))
}

// item is one message for one config, or (wake set) the config's
// wake-up: drain its backlog.
type item struct {
	job  *job
	cfg  Config
	ref  configRef
	wake jetstream.Msg
}

// maxLaneQueue bounds the messages waiting in a lane behind the one it
// delivers: a further one is handed to the config's backlog at once
// (parkItem), so that a slow webhook holds at most maxLaneQueue+1 of the
// consumer's messages, and none once its config is parked.
const maxLaneQueue = 4

// lane delivers the messages of one config one after another, in the
// order they came: a slow or failing webhook holds only its own lane.
type lane struct {
	key      string
	s        *stage
	queue    []item
	running  bool
	draining bool // the lane runs the config's drain
}

// enqueue appends it to its config's lane, starting the lane when idle.
// A message for a lane that drains its config, or whose queue is full,
// goes to the config's backlog instead.
func (s *stage) enqueue(it item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := it.ref.cursorKey()
	l := s.lanes[k]
	if l == nil {
		l = &lane{key: k, s: s}
		s.lanes[k] = l
	}
	if it.wake == nil && (l.draining || len(l.queue) >= maxLaneQueue) {
		go func() { it.job.done <- s.parkItem(it) }()
		return
	}
	l.queue = append(l.queue, it)
	if !l.running {
		l.running = true
		go l.run()
	}
}

func (l *lane) run() {
	for {
		l.s.mu.Lock()
		if len(l.queue) == 0 {
			l.running = false
			delete(l.s.lanes, l.key)
			l.s.mu.Unlock()
			return
		}
		it := l.queue[0]
		l.queue = l.queue[1:]
		if it.wake == nil {
			l.s.mu.Unlock()
			it.job.done <- l.s.deliverItem(it)
			continue
		}
		// The messages queued behind the wake-up go to the backlog: the
		// drain delivers them.
		l.draining = true
		var wakes []item
		for _, q := range l.queue {
			if q.wake == nil {
				go func() { q.job.done <- l.s.parkItem(q) }()
			} else {
				wakes = append(wakes, q)
			}
		}
		l.queue = wakes
		l.s.mu.Unlock()
		l.s.drainWake(it)
		l.s.mu.Lock()
		l.draining = false
		l.s.mu.Unlock()
	}
}

// undecodableFirst is the e2a sequence of the first frame of a message
// whose frames do not decode, as its E2A-Sequence header says, or 1 when
// the header is no sequence: such a message is then taken for a later
// message of its request, never for the first of a turn.
func undecodableFirst(h nats.Header) int64 {
	if n, err := strconv.ParseInt(h.Get(subjects.HeaderSequence), 10, 64); err == nil && n >= 0 {
		return n
	}
	return 1
}

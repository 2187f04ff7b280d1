package natstest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Config returns streams.DefaultConfig adjusted for tests: E2A_REQUESTS
// bounded to 64 MiB so that any machine can reserve it. Ages and windows
// are the production ones; shorten them (keeping Duplicates within the max
// ages) to test expiry.
func Config() streams.Config {
	c := streams.DefaultConfig()
	c.RequestsMaxBytes = 64 << 20
	return c
}

type options struct {
	cfg      streams.Config
	noApply  bool
	embedded streams.EmbeddedOptions
}

// Option configures RunServer and RunCluster. Options validate their
// arguments; a bad one fails the test with an error wrapping
// ErrInvalidOption.
type Option func(*options) error

// WithConfig applies cfg instead of Config(). RunCluster still sets
// Replicas to min(n, 3). A cfg that fails cfg.Validate is refused.
func WithConfig(cfg streams.Config) Option {
	err := cfg.Validate()
	return option.Check(ErrInvalidOption, err == nil, func(o *options) { o.cfg = cfg }, "streams config: %v", err)
}

// WithoutStreams starts the servers without applying any stream.
func WithoutStreams() Option { return func(o *options) error { o.noApply = true; return nil } }

// WithSyncAlways makes the servers fsync every write, as production does.
func WithSyncAlways() Option {
	return func(o *options) error { o.embedded.SyncAlways = true; return nil }
}

// maxPayloadLimit is the largest max_payload a NATS server accepts.
const maxPayloadLimit = 64 << 20

// WithMaxPayload sets the servers' max_payload (the largest message,
// headers included, they accept) to n bytes instead of the default 1 MiB;
// n outside [1, 64 MiB] is refused.
func WithMaxPayload(n int32) Option {
	return option.Check(ErrInvalidOption, n >= 1 && n <= maxPayloadLimit,
		func(o *options) { o.embedded.MaxPayload = n },
		"max payload %d not in [1, %d]", n, maxPayloadLimit)
}

func buildOptions(opts []Option) (options, error) {
	o := options{cfg: Config()}
	if err := option.Apply(ErrInvalidOption, &o, opts); err != nil {
		return o, err
	}
	return o, nil
}

// mustBuildOptions is buildOptions failing t on a bad option.
func mustBuildOptions(t testing.TB, opts []Option) options {
	t.Helper()
	o, err := buildOptions(opts)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return o
}

// RunServer starts an embedded JetStream server on a random loopback port
// with its store in t.TempDir(), applies the E2A streams and buckets
// (Config(), unless WithConfig or WithoutStreams), and returns it with an
// in-process connection. Both are closed by t.Cleanup. Tools and other
// connections can use srv.ClientURL().
func RunServer(t testing.TB, opts ...Option) (*streams.Embedded, *nats.Conn) {
	t.Helper()
	o := mustBuildOptions(t, opts)
	eo := o.embedded
	eo.StoreDir = t.TempDir()
	srv, err := streams.StartEmbedded(eo)
	if err != nil {
		t.Fatalf("natstest: start server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect(nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	if !o.noApply {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if rep, err := streams.Apply(ctx, js, o.cfg); err != nil {
			t.Fatalf("natstest: apply streams: %v\n%s", err, rep)
		}
	}
	return srv, nc
}

// Restartable is an embedded JetStream server that a test stops and starts
// again on the same loopback port and store: to its clients, a server
// restart (they reconnect to the same URL). No streams are applied.
type Restartable struct {
	t    testing.TB
	port int
	dir  string
	srv  *streams.Embedded
}

// RunRestartable starts a Restartable; t.Cleanup stops it.
func RunRestartable(t testing.TB) *Restartable {
	t.Helper()
	r := &Restartable{t: t, port: FreePorts(t, 1)[0], dir: t.TempDir()}
	r.Start()
	t.Cleanup(func() { r.Stop() })
	return r
}

// URL is the server's client URL, the same across restarts.
func (r *Restartable) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", r.port) }

// Port is the server's client port.
func (r *Restartable) Port() int { return r.port }

// Stop shuts the server down (a no-op when it is stopped).
func (r *Restartable) Stop() {
	if r.srv != nil {
		r.srv.Shutdown()
		r.srv = nil
	}
}

// Subscribed reports whether a client connection of that name is on
// the server with at least one subscription: its connect handshake is
// over (nats.go subscribes only once the server answered its CONNECT),
// so stopping the server now is a lost connection to the client, never
// a failed connect. A client merely listed may still be waiting for
// that answer (CI on e767e080: e2a tail's connect ended with EOF).
func (r *Restartable) Subscribed(name string) bool {
	cz, err := r.srv.Server().Connz(&server.ConnzOptions{})
	if err != nil {
		return false
	}
	for _, c := range cz.Conns {
		if c.Name == name && c.NumSubs > 0 {
			return true
		}
	}
	return false
}

// ApplyStreams applies the E2A streams and buckets (Config()) on the
// running server, over a connection of its own.
func (r *Restartable) ApplyStreams() {
	r.t.Helper()
	nc, err := nats.Connect(r.URL(), nats.Name(r.t.Name()))
	if err != nil {
		r.t.Fatalf("natstest: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatalf("natstest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rep, err := streams.Apply(ctx, js, Config()); err != nil {
		r.t.Fatalf("natstest: apply streams: %v\n%s", err, rep)
	}
}

// Start starts the server again on its port and store.
func (r *Restartable) Start() {
	r.t.Helper()
	srv, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: r.dir, Port: r.port})
	if err != nil {
		r.t.Fatalf("natstest: start server on port %d: %v", r.port, err)
	}
	r.srv = srv
}

// JetStream returns a jetstream.JetStream on nc, failing t on error.
func JetStream(t testing.TB, nc *nats.Conn, opts ...jetstream.JetStreamOpt) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return js
}

// Cluster is an in-process cluster of JetStream servers.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes []*streams.Embedded // nil while killed
	opts  []streams.EmbeddedOptions
}

// ClusterName is the name of the clusters RunCluster starts.
const ClusterName = "e2a-test"

// RunCluster starts n JetStream servers (n >= 1) clustered through routes
// on random loopback ports, each with its store in a t.TempDir(), waits
// until the meta group has a leader and every node is current, and applies
// the E2A streams and buckets with Replicas min(n, 3) (unless
// WithoutStreams). t.Cleanup shuts every node down.
func RunCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d nodes", n)
	}
	o := mustBuildOptions(t, opts)
	c := &Cluster{t: t, nodes: make([]*streams.Embedded, n), opts: make([]streams.EmbeddedOptions, n)}
	// Directories first: cleanups run last registered first, and the nodes
	// must stop before their directories go.
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(c.shutdown)
	// Every node routes to every node, so the route ports are chosen first.
	// The client ports too, below the ephemeral range (FreePorts): a node
	// restarts on its port, which an outgoing connection (a client's
	// reconnect while the node is down) may hold in that range, leaving
	// the node without its client listener ("restart node 1: … no client
	// listener after 10s", TestReadyzDegradedWithoutQuorum beside other
	// load).
	ports := FreePorts(t, 2*n)
	routes := make([]string, n)
	for i, p := range ports[:n] {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	for i := range n {
		eo := o.embedded
		eo.StoreDir = dirs[i]
		eo.ServerName = fmt.Sprintf("n%d", i)
		if eo.Port == 0 {
			eo.Port = ports[n+i]
		}
		eo.Cluster = &streams.ClusterOptions{Name: ClusterName, Port: ports[i], Routes: routes}
		e, err := streams.StartEmbedded(eo)
		if err != nil {
			t.Fatalf("natstest: start node %d: %v", i, err)
		}
		c.nodes[i] = e
		c.opts[i] = e.Options()
	}
	c.WaitReady()
	if !o.noApply {
		cfg := o.cfg
		cfg.Replicas = min(n, 3)
		nc := c.Connect()
		defer nc.Close()
		js := JetStream(t, nc)
		// Right after the election the meta leader may not know every peer
		// yet: retry while the cluster settles.
		deadline := time.Now().Add(20 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rep, err := streams.Apply(ctx, js, cfg)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("natstest: apply streams on the cluster: %v\n%s", err, rep)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c
}

// WaitReady waits until every running node is current with a meta leader.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c.MetaLeader() >= 0 && c.allCurrent() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: cluster not ready: meta leader %d", c.MetaLeader())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Cluster) allCurrent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.nodes {
		if e != nil && (!e.Server().JetStreamEnabled() || !e.Server().JetStreamIsCurrent()) {
			return false
		}
	}
	return true
}

// WaitStreamsSynced waits until every running node's replica of each
// stream holds the same last sequence, and fails the test after 30 s. A
// direct get may be answered by any replica: a read that must see every
// message the leader acknowledged (a test's final check of what is
// stored) waits for this first, once the writers are done.
func (c *Cluster) WaitStreamsSynced(names ...string) {
	c.t.Helper()
	testkit.Eventually(c.t, 30*time.Second, fmt.Sprintf("every replica of %v at the same last sequence", names), func() bool {
		return c.streamsSynced(names) == nil
	})
}

func (c *Cluster) streamsSynced(names []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var nodes []*server.JSInfo
	for _, e := range c.nodes {
		if e == nil {
			continue
		}
		z, err := e.Server().Jsz(&server.JSzOptions{Accounts: true, Streams: true})
		if err != nil {
			return err
		}
		nodes = append(nodes, z)
	}
	_, err := SameLastSeqs(nodes, names...)
	return err
}

// SameLastSeqs returns the last sequence of each named stream when every
// node's JetStream report (one per node: nats-server's Jsz, or /jsz with
// accounts and streams) holds a replica of it at the same last sequence,
// and an error naming the first difference otherwise.
func SameLastSeqs(nodes []*server.JSInfo, names ...string) (map[string]uint64, error) {
	last := map[string]uint64{}
	for i, z := range nodes {
		seen := map[string]bool{}
		for _, a := range z.AccountDetails {
			for _, st := range a.Streams {
				if !slices.Contains(names, st.Name) {
					continue
				}
				if n, ok := last[st.Name]; ok && n != st.State.LastSeq {
					return last, fmt.Errorf("%s at %d on node %d, %d on another", st.Name, st.State.LastSeq, i, n)
				}
				last[st.Name], seen[st.Name] = st.State.LastSeq, true
			}
		}
		for _, name := range names {
			if !seen[name] {
				return last, fmt.Errorf("node %d holds no replica of %s", i, name)
			}
		}
	}
	return last, nil
}

// MetaLeader returns the index of the node leading the meta group, or -1.
func (c *Cluster) MetaLeader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.nodes {
		if e != nil && e.Server().JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// StreamLeader returns the index of the node leading stream, or -1.
func (c *Cluster) StreamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.nodes {
		if e != nil && e.Server().JetStreamIsStreamLeader(globalAccount, stream) {
			return i
		}
	}
	return -1
}

// ConsumerLeader returns the index of the node leading the consumer
// of stream, or -1. A consumer's Raft group elects its leader apart from
// its stream's: after a restart the stream may have one while a pull from
// the consumer still waits for the consumer's (seconds).
func (c *Cluster) ConsumerLeader(stream, consumer string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.nodes {
		if e != nil && e.Server().JetStreamIsConsumerLeader(globalAccount, stream, consumer) {
			return i
		}
	}
	return -1
}

// Leaderless kills every node but keep and returns them (for Restart),
// leaving stream without a leader: the node kept, which may have taken
// the leadership over from a node killed (a clean shutdown hands it on)
// and would keep it without a quorum, is asked to step down, and
// Leaderless waits until no running node leads stream (20 s at most).
// Its clients then meet what they meet while a cluster elects a leader
// after a crash: no responder for the stream's requests.
func (c *Cluster) Leaderless(stream string, keep int) []int {
	c.t.Helper()
	var down []int
	for i := range c.Size() {
		if i != keep {
			c.Kill(i)
			down = append(down, i)
		}
	}
	nc, err := c.Node(keep).Connect()
	if err != nil {
		c.t.Fatalf("natstest: connect to node %d: %v", keep, err)
	}
	defer nc.Close()
	testkit.Eventually(c.t, 20*time.Second, stream+" without a leader", func() bool {
		if c.StreamLeader(stream) == keep {
			_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, time.Second)
		}
		return c.StreamLeader(stream) < 0
	})
	return down
}

// globalAccount is the account of clients of servers without accounts.
const globalAccount = "$G"

// Node returns node i, or nil while it is killed.
func (c *Cluster) Node(i int) *streams.Embedded {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Size returns the number of nodes, killed ones included.
func (c *Cluster) Size() int { return len(c.nodes) }

// ClientURLs returns the client URLs of every node, killed ones included
// (they come back at the same address).
func (c *Cluster) ClientURLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://%s:%d", o.Host, o.Port)
	}
	return urls
}

// URL returns ClientURLs joined with commas, for nats.Connect.
func (c *Cluster) URL() string { return strings.Join(c.ClientURLs(), ",") }

// Connect connects over TCP to all nodes, reconnecting forever, with opts
// appended; t.Cleanup closes the connection.
func (c *Cluster) Connect(opts ...nats.Option) *nats.Conn {
	c.t.Helper()
	all := append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond), nats.Name(c.t.Name())}, opts...)
	nc, err := nats.Connect(c.URL(), all...)
	if err != nil {
		c.t.Fatalf("natstest: connect to cluster: %v", err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// Kill shuts node i down, keeping its store for Restart. The shutdown is
// the server's clean one: it hands its Raft leaderships over before
// stopping, so the other nodes elect new leaders at once rather than after
// an election timeout (no in-process way to crash a node exists).
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	e := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if e != nil {
		e.Shutdown()
	}
}

// Restart starts killed nodes again, each with its store, name, addresses
// and routes, and then waits until the cluster is ready (once for all: two
// nodes of three restarted one at a time leave the first alone without a
// quorum while it waits).
func (c *Cluster) Restart(nodes ...int) {
	c.t.Helper()
	for _, i := range nodes {
		c.mu.Lock()
		if c.nodes[i] != nil {
			c.mu.Unlock()
			c.t.Fatalf("natstest: node %d is running", i)
		}
		o := c.opts[i]
		c.mu.Unlock()
		e, err := streams.StartEmbedded(o)
		if err != nil {
			c.t.Fatalf("natstest: restart node %d: %v", i, err)
		}
		c.mu.Lock()
		c.nodes[i] = e
		c.mu.Unlock()
	}
	c.WaitReady()
}

func (c *Cluster) shutdown() {
	for i := range c.nodes {
		c.Kill(i)
	}
}

// FreePorts returns n distinct loopback ports that were free a moment ago,
// for servers started a moment later (the in-process cluster's routes, the
// deployment tests' nats-server and e2a processes).
// They are drawn below the kernel's ephemeral range (Linux: from 32768):
// a port freed here and bound by the node a moment later cannot meanwhile
// become the local port of some other test's outgoing connection or
// port-0 listener, which left a node without its route listener ("no
// client listener after 10s") when the suite ran beside other load.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	const lo, hi = 20000, 32000
	ls := make([]net.Listener, 0, n)
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("natstest: no free port in [%d, %d)", lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// Counter counts the messages a connection publishes on some subjects (the
// JetStream API requests of a stage, say): a synchronous subscription on
// that same connection receives a copy of each, queued before the answer
// to a later flush, so Count sees every one published before it.
type Counter struct {
	nc   *nats.Conn
	subs []*nats.Subscription
}

// CountOn starts counting what nc publishes on subjs (wildcards allowed).
func CountOn(t testing.TB, nc *nats.Conn, subjs ...string) *Counter {
	t.Helper()
	c := &Counter{nc: nc}
	for _, subj := range subjs {
		sub, err := nc.SubscribeSync(subj)
		if err != nil {
			t.Fatalf("natstest: subscribe %s: %v", subj, err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		c.subs = append(c.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("natstest: flush: %v", err)
	}
	return c
}

// DirectGets counts the direct gets nc sends to stream (batched and by
// subject).
func DirectGets(t testing.TB, nc *nats.Conn, stream string) *Counter {
	t.Helper()
	return CountOn(t, nc, subjects.DirectGet(stream), subjects.DirectGetLast(stream, ">"))
}

// Count returns how many messages were counted so far.
func (c *Counter) Count(t testing.TB) int {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Fatalf("natstest: flush: %v", err)
	}
	n := 0
	for _, s := range c.subs {
		p, _, err := s.Pending()
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		n += p
	}
	return n
}

// Subjects returns the subjects of the messages counted so far, and
// counts them no more.
func (c *Counter) Subjects(t testing.TB) []string {
	t.Helper()
	n := c.Count(t)
	var out []string
	for _, s := range c.subs {
		for len(out) < n {
			m, err := s.NextMsg(0)
			if err != nil {
				break // this subscription has no more
			}
			out = append(out, m.Subject)
		}
	}
	return out
}

// PublishBurst stores frames, consecutive frames of requestID from sequence
// first, as one message on its response subject, as the agent runtime
// writes them: E2A-Request-Id, E2A-Sequence (first), E2A-Frames (when more
// than one) and the payload joined by line feeds (e2a.AppendBurst), fenced
// with the expected last subject sequence expected (the previous message's
// stream sequence, 0 for the first). It returns the message's stream
// sequence and fails the test when the server refuses it.
func PublishBurst(t testing.TB, nc *nats.Conn, requestID string, first int64, expected uint64, frames ...[]byte) uint64 {
	t.Helper()
	subj, err := subjects.Response(requestID)
	if err != nil {
		t.Fatalf("PublishBurst: %v", err)
	}
	m := nats.NewMsg(subj)
	m.Header.Set(subjects.HeaderRequestID, requestID)
	m.Header.Set(subjects.HeaderSequence, strconv.FormatInt(first, 10))
	if len(frames) > 1 {
		m.Header.Set(subjects.HeaderFrames, strconv.Itoa(len(frames)))
	}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expected, 10))
	for _, f := range frames {
		m.Data = e2a.AppendBurst(m.Data, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := streams.Publish(ctx, nc, m)
	if err != nil {
		t.Fatalf("PublishBurst %q from %d: %v", requestID, first, err)
	}
	return ack.Seq
}

// Frame returns frame seq of request id as an agent would store it: a text
// chunk ("piece <seq>", in progress), or, when final, the final
// e2a.complete frame (result {"content":"done"}).
func Frame(id string, seq int64, final bool) []byte {
	if final {
		return frame(id, seq, true, "")
	}
	return frame(id, seq, false, "piece "+strconv.FormatInt(seq, 10))
}

// TextFrame builds frame seq of request id, a text chunk of text.
func TextFrame(id string, seq int64, text string) []byte { return frame(id, seq, false, text) }

func frame(id string, seq int64, final bool, text string) []byte {
	r := e2a.ResponseFor(&e2a.Envelope{RequestID: id})
	r.ResponseID = id + "-" + strconv.FormatInt(seq, 10)
	r.Sequence = seq
	r.Timestamp = e2a.Now()
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	if final {
		r.IsFinal, r.Status, r.ResponseKind = true, e2a.StatusSucceeded, e2a.KindComplete
		r.Body = e2a.MarshalBody(e2a.CompleteBody{Result: map[string]any{"content": "done"}})
	} else {
		r.Status, r.ResponseKind = e2a.StatusInProgress, e2a.KindChunk
		r.Body = e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text})
	}
	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		panic(err) // a frame built above always encodes
	}
	return b
}

// StoredFrame is one frame of a request as E2A_RESPONSES holds it: its
// bytes and the sequence of the message holding it (a burst's frames
// share it).
type StoredFrame struct {
	Raw []byte
	Seq uint64
}

// StoredRequest reads what the hot streams hold of request id, as an audit
// history copy gives it: the envelope and the frames (of at most 64
// messages), bursts split.
func StoredRequest(t testing.TB, nc *nats.Conn, id string) (envelope []byte, frames []StoredFrame) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj, _ := subjects.RequestAnyPool(id)
	env, err := streams.LastBySubject(ctx, nc, streams.RequestsStream, subj)
	if err != nil {
		t.Fatal(err)
	}
	rsubj, _ := subjects.Response(id)
	msgs, err := streams.DirectGetAll(ctx, nc, streams.ResponsesStream, rsubj, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		burst, err := e2a.SplitBurst(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range burst {
			frames = append(frames, StoredFrame{Raw: f, Seq: m.Seq})
		}
	}
	return env.Data, frames
}

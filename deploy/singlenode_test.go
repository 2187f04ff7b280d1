package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// singleServer is one real nats-server process with JetStream on a store
// directory that outlives its restarts.
type singleServer struct {
	t   testing.TB
	bin string
	nd  *natsNode
}

func startSingleServer(t testing.TB) *singleServer {
	t.Helper()
	s := &singleServer{t: t, bin: natsServerBinary(t), nd: &natsNode{name: "nats", dir: t.TempDir(), port: natstest.FreePorts(t, 1)[0]}}
	s.nd.logPath = filepath.Join(s.nd.dir, "server.log")
	s.start()
	t.Cleanup(func() {
		if !s.nd.exited() {
			s.nd.kill(t)
		}
	})
	return s
}

func (s *singleServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.nd.port) }

// start starts (or restarts) the server on its store directory.
func (s *singleServer) start() {
	s.t.Helper()
	s.nd.run(s.t, s.bin, []string{"-js", "-sd", filepath.Join(s.nd.dir, "js"), "-a", "127.0.0.1", "-p", strconv.Itoa(s.nd.port),
		"-l", s.nd.logPath}, nil)
}

// connect connects once the server accepts connections and JetStream
// answers (after a restart it first recovers its streams).
func (s *singleServer) connect() (*nats.Conn, jetstream.JetStream) {
	s.t.Helper()
	var (
		nc  *nats.Conn
		js  jetstream.JetStream
		err error
	)
	ready := testkit.Until(30*time.Second, func() bool {
		if nc, err = nats.Connect(s.url(), nats.MaxReconnects(0)); err != nil {
			return false
		}
		js, _ = jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err = js.AccountInfo(ctx); err != nil {
			nc.Close()
			return false
		}
		return true
	})
	if !ready {
		s.t.Fatalf("nats-server on %s not ready: %v\n%s", s.url(), err, s.nd.logTail())
	}
	s.t.Cleanup(nc.Close)
	return nc, js
}

// On one server E2A_AUDIT is written in async persist mode: a SIGKILL can
// lose its newest copies, which its sources copy again at restart. Traffic
// runs until the kill; after the restart E2A_AUDIT holds every request and
// frame E2A_REQUESTS and E2A_RESPONSES kept, each once, in each stream's
// order.
func TestSingleServerAuditAfterKill(t *testing.T) {
	t.Parallel()
	srv := startSingleServer(t)
	nc, js := srv.connect()
	cfg := natstest.Config()
	if cfg.Replicas != 1 || cfg.Storage != jetstream.FileStorage {
		t.Fatalf("config: %d replicas, %v", cfg.Replicas, cfg.Storage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := streams.Apply(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if s, err := js.Stream(ctx, streams.AuditStream); err != nil || s.CachedInfo().Config.PersistMode != jetstream.AsyncPersistMode {
		t.Fatalf("E2A_AUDIT: %v", err)
	}

	// A request and 7 frames per id, published without waiting, until the
	// kill.
	var acked atomic.Int64
	stop := make(chan struct{})
	publishing := make(chan struct{})
	go func() {
		defer close(publishing)
		body := []byte(strings.Repeat("x", 200))
		for i := 0; ; i++ {
			id := fmt.Sprintf("kill-%d", i)
			req, _ := subjects.Request("pool", id)
			resp, _ := subjects.Response(id)
			futures := []jetstream.PubAckFuture{}
			for j := range 8 {
				subj := resp
				if j == 0 {
					subj = req
				}
				f, err := js.PublishAsync(subj, body)
				if err != nil {
					return
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
					acked.Add(1)
				case <-f.Err():
					return
				case <-stop:
					return
				}
			}
		}
	}()
	waitUntil(t, time.Minute, "20,000 acknowledged publishes", func() bool { return acked.Load() >= 20000 })
	before, _ := streamLast(ctx, js, streams.AuditStream)
	srv.nd.kill(t)
	close(stop)
	<-publishing
	nc.Close()

	srv.start()
	_, js = srv.connect()
	after, _ := streamLast(ctx, js, streams.AuditStream)
	t.Logf("%d publishes acknowledged before the kill; E2A_AUDIT's last sequence %d just before it, %d at restart", acked.Load(), before, after)

	want := map[string]jetstream.StreamState{}
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = s.CachedInfo().State
	}
	total := want[streams.RequestsStream].Msgs + want[streams.ResponsesStream].Msgs
	if total < 20000 {
		t.Fatalf("only %d messages survived in the hot streams, %d were acknowledged", total, acked.Load())
	}
	waitUntil(t, time.Minute, "E2A_AUDIT to hold every request and frame", func() bool {
		s, err := js.Stream(ctx, streams.AuditStream)
		return err == nil && s.CachedInfo().State.Msgs >= total
	})

	c, err := js.OrderedConsumer(ctx, streams.AuditStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]uint64{}
	var n uint64
	for n < total {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			n++
			f := strings.Fields(m.Headers().Get(subjects.HeaderStreamSource))
			if len(f) < 2 {
				t.Fatalf("audit message without its source: %v", m.Headers())
			}
			seq, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("source header %v", f)
			}
			st, ok := want[f[0]]
			if !ok {
				t.Fatalf("source %q", f[0])
			}
			prev := last[f[0]]
			if prev == 0 {
				prev = st.FirstSeq - 1
			}
			if seq != prev+1 {
				t.Fatalf("%s: sequence %d copied after %d", f[0], seq, prev)
			}
			last[f[0]] = seq
		}
		if got == 0 {
			t.Fatalf("E2A_AUDIT read stopped after %d of %d messages", n, total)
		}
	}
	for name, st := range want {
		if last[name] != st.LastSeq {
			t.Errorf("%s: copied up to %d, holds up to %d", name, last[name], st.LastSeq)
		}
	}
	s, _ := js.Stream(ctx, streams.AuditStream)
	if got := s.CachedInfo().State.Msgs; got != total {
		t.Errorf("E2A_AUDIT holds %d messages, the hot streams %d", got, total)
	}
}

// streamLast is a stream's last sequence.
func streamLast(ctx context.Context, js jetstream.JetStream, name string) (uint64, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq, nil
}

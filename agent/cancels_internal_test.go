package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// watchFixture is a cancel watch on a real server: its subscription records
// every cancel and signals it; block holds the subscription's callback.
type watchFixture struct {
	c        *cancelWatch
	nc       *nats.Conn // the watch's connection (TCP)
	pub      *nats.Conn
	recorded chan string
	block    chan struct{}
	srv      *streams.Embedded
	spawned  atomic.Int32
	// disconnected is closed when nc loses its server.
	disconnected chan struct{}
}

func newWatchFixture(t testing.TB, limit int, blocked bool) *watchFixture {
	t.Helper()
	srv, pub := natstest.RunServer(t)
	disconnected := make(chan struct{})
	var once sync.Once
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { once.Do(func() { close(disconnected) }) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f := &watchFixture{c: newCancelWatch(limit), nc: nc, pub: pub, recorded: make(chan string, 16), block: make(chan struct{}), srv: srv,
		disconnected: disconnected}
	if !blocked {
		close(f.block)
	}
	sub, err := nc.Subscribe(subjects.AllControl, func(m *nats.Msg) {
		<-f.block
		id, _ := subjects.ParseControl(m.Subject)
		f.c.record(id)
		f.recorded <- id
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c.nc, f.c.sub = nc, sub
	// Reads of the anchor a check starts are counted, not run: the tests
	// read it when they choose.
	f.c.spawn = func(func()) { f.spawned.Add(1) }
	f.c.read = lastSeqReader(natstest.JetStream(t, nc), streams.RequestsStream)
	return f
}

func (f *watchFixture) anchor(t testing.TB) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.c.anchorNow(ctx); err != nil {
		t.Fatalf("anchor: %v", err)
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return f.c.anchor
}

// wantInvalid checks that the anchor is invalid and that one read of it
// was started, after what.
func (f *watchFixture) wantInvalid(t *testing.T, what string) {
	t.Helper()
	f.c.mu.Lock()
	valid := f.c.valid
	f.c.mu.Unlock()
	if valid || f.spawned.Load() != 1 {
		t.Fatalf("after %s: anchor valid %v, %d reads started", what, valid, f.spawned.Load())
	}
}

// storeRequest stores a request and returns its stream sequence.
func (f *watchFixture) storeRequest(t testing.TB, id string) uint64 {
	t.Helper()
	js := natstest.JetStream(t, f.pub)
	subj, _ := subjects.Request("p", id)
	ack, err := js.Publish(context.Background(), subj, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func (f *watchFixture) cancel(t *testing.T, id string) {
	t.Helper()
	subj, _ := subjects.Control(id)
	if err := f.pub.Publish(subj, []byte(`{"type":"cancel"}`)); err != nil {
		t.Fatal(err)
	}
	if err := f.pub.Flush(); err != nil {
		t.Fatal(err)
	}
}

func wantCheck(t *testing.T, c *cancelWatch, id string, seq uint64, cancelled, covered bool) {
	t.Helper()
	if gc, gv, _ := c.checkAt(id, seq, time.Time{}); gc != cancelled || gv != covered {
		t.Fatalf("check(%s, %d) = cancelled %v, covered %v; want %v, %v", id, seq, gc, gv, cancelled, covered)
	}
}

func TestCancelWatchCoversRequestsAfterItsAnchor(t *testing.T) {
	t.Parallel()
	f := newWatchFixture(t, 8, false)
	before := f.storeRequest(t, "before")
	f.anchor(t)
	after := f.storeRequest(t, "after")
	wantCheck(t, f.c, "before", before, false, false) // stored before: read the stored cancel
	wantCheck(t, f.c, "after", after, false, true)
	f.cancel(t, "after")
	<-f.recorded
	wantCheck(t, f.c, "after", after, true, true)
	f.cancel(t, "before") // a live cancel answers for any request
	<-f.recorded
	wantCheck(t, f.c, "before", before, true, true)
}

func TestCancelWatchWaitingMessagesAreNotProof(t *testing.T) {
	t.Parallel()
	f := newWatchFixture(t, 8, true)
	f.anchor(t)
	seq := f.storeRequest(t, "r")
	f.cancel(t, "r")
	if err := f.nc.Flush(); err != nil { // the cancel is in the subscription's queue
		t.Fatal(err)
	}
	wantCheck(t, f.c, "r", seq, false, false)
	close(f.block)
	<-f.recorded
	wantCheck(t, f.c, "r", seq, true, true)
}

func TestCancelWatchDroppedMessageInvalidates(t *testing.T) {
	t.Parallel()
	f := newWatchFixture(t, 8, true)
	if err := f.c.sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	f.anchor(t)
	seq := f.storeRequest(t, "r")
	for _, id := range []string{"a", "b", "c"} {
		f.cancel(t, id)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.c.sub.Dropped(); n == 0 {
		t.Fatal("no message dropped")
	}
	close(f.block)
	<-f.recorded // what the subscription kept
	wantCheck(t, f.c, "r", seq, false, false)
	f.wantInvalid(t, "a dropped message")
	// A new anchor covers what is stored after it again.
	f.anchor(t)
	seq = f.storeRequest(t, "r2")
	wantCheck(t, f.c, "r2", seq, false, true)
}

func TestCancelWatchEvictionInvalidates(t *testing.T) {
	t.Parallel()
	f := newWatchFixture(t, 2, false)
	f.anchor(t)
	seq := f.storeRequest(t, "x")
	for _, id := range []string{"a", "b", "c"} {
		f.cancel(t, id)
		<-f.recorded
	}
	wantCheck(t, f.c, "x", seq, false, false) // "a" is forgotten: nothing stored yet is covered
	wantCheck(t, f.c, "c", seq, true, true)
	f.wantInvalid(t, "an eviction")
	f.anchor(t)
	wantCheck(t, f.c, "x", seq, false, false) // stored before the new anchor
	wantCheck(t, f.c, "y", f.storeRequest(t, "y"), false, true)
}

func TestCancelWatchDisconnectedCoversNothing(t *testing.T) {
	t.Parallel()
	f := newWatchFixture(t, 8, false)
	f.anchor(t)
	seq := f.storeRequest(t, "r")
	wantCheck(t, f.c, "r", seq, false, true)
	f.srv.Shutdown()
	<-f.disconnected
	wantCheck(t, f.c, "r", seq, false, false)
	f.wantInvalid(t, "the disconnect")
}

// BenchmarkCancelWatchCheck: pick-ups checking a covered request in
// parallel while the watch's connection publishes, as a worker's frames do.
func BenchmarkCancelWatchCheck(b *testing.B) {
	f := newWatchFixture(b, 8, false)
	f.anchor(b)
	seq := f.storeRequest(b, "r")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				// A subscribe and an unsubscribe hold the connection's lock
				// as an egress reader's do.
				if sub, err := f.nc.SubscribeSync("bench.frames"); err == nil {
					_ = f.nc.Publish("bench.frames", []byte("frame"))
					_ = sub.Unsubscribe()
				}
			}
		}
	}()
	b.SetParallelism(16) // many pick-ups at once, as a pool's fetch loop runs them
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if cancelled, covered, _ := f.c.checkAt("r", seq, time.Time{}); cancelled || !covered {
				b.Errorf("check = %v, %v; want covered, not cancelled", cancelled, covered)
				return
			}
		}
	})
	b.StopTimer()
	close(stop)
	<-done
}

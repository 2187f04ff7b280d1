package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

func TestReplayFinished(t *testing.T) {
	e := startEnv(t)
	e.finished(t, "req_1", 5)
	// Another request interleaved in the stream must not leak in.
	e.finished(t, "req_2", 3)
	ctx := context.Background()
	for _, from := range []int64{0, 1, 3, 5, 6, 100} {
		frames, err := collect(t, ctx, e.nc, "req_1", from, WithBatch(2, 0))
		if err != nil {
			t.Fatalf("from %d: %v", from, err)
		}
		want := 6 - from
		if want < 0 {
			want = 0
		}
		if int64(len(frames)) != want {
			t.Fatalf("from %d: %d frames, want %d", from, len(frames), want)
		}
		checkSeq(t, frames, from, want > 0)
		for _, f := range frames {
			if f.Response.RequestID != "req_1" || len(f.Raw) == 0 || f.StreamSeq == 0 {
				t.Fatalf("bad frame %+v", f)
			}
		}
	}
}

func TestReplayHostileID(t *testing.T) {
	e := startEnv(t)
	id := "a.b *>  é/" + string(make([]byte, 3))
	e.finished(t, id, 2)
	frames, err := collect(t, context.Background(), e.nc, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeq(t, frames, 0, true)
	if len(frames) != 3 {
		t.Fatalf("%d frames", len(frames))
	}
}

func TestReplayNotFound(t *testing.T) {
	e := startEnv(t)
	e.finished(t, "other", 1)
	_, err := collect(t, context.Background(), e.nc, "nope", 0)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	_, err = collect(t, context.Background(), e.nc, "", 0)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty id: err = %v, want ErrNotFound", err)
	}
	_, err = collect(t, context.Background(), e.nc, "x", -1)
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("negative from: err = %v", err)
	}
}

func TestReplayWaitsWithHeartbeats(t *testing.T) {
	e := startEnv(t)
	env := newEnvelope("req_wait")
	e.submit(t, env)
	w := e.writer(t, env)
	beats := make(chan struct{}, 64)
	done := make(chan error, 1)
	var frames []render.Frame
	go func() {
		var err error
		frames, err = collect(t, context.Background(), e.nc, "req_wait", 0,
			WithHeartbeat(20*time.Millisecond, func() error {
				select {
				case beats <- struct{}{}:
				default:
				}
				return nil
			}))
		done <- err
	}()
	// Two heartbeats while no frame exists: the reader waits, alive.
	for i := range 2 {
		testkit.Receive(t, beats, 10*time.Second, "only %d heartbeats before the first frame", i)
	}
	w.text("a")
	w.text("b")
	w.complete("ab")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkSeq(t, frames, 0, true)
	if len(frames) != 3 {
		t.Fatalf("%d frames", len(frames))
	}
}

func TestReplayMaxWait(t *testing.T) {
	e := startEnv(t)
	e.submit(t, newEnvelope("req_silent"))
	start := time.Now()
	_, err := collect(t, context.Background(), e.nc, "req_silent", 0, WithMaxWait(100*time.Millisecond, 0))
	if !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("waited %s", d)
	}
	// Idle limit between frames.
	env := newEnvelope("req_stall")
	e.submit(t, env)
	e.writer(t, env).text("x")
	frames, err := collect(t, context.Background(), e.nc, "req_stall", 0, WithMaxWait(0, 100*time.Millisecond))
	if !errors.Is(err, ErrWaitTimeout) || len(frames) != 1 {
		t.Fatalf("err = %v, %d frames", err, len(frames))
	}
}

// TestReplayFinalBeforeResumeFoldedKey: a final frame whose is_final key
// is spelled otherwise but matched by encoding/json (another case, an
// escape) is final to every reader of frames (e2a's decoding, render.Head),
// so a reader from the start ends after it, and so does a reader resuming
// after it, which finds it before its resume point: alone in its message
// or at the end of a burst.
func TestReplayFinalBeforeResumeFoldedKey(t *testing.T) {
	e := startEnv(t)
	// Every read ends at once; the timeout bounds the readers that would
	// wait for frames after the final one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, key := range []string{`"Is_Final"`, `"IS_FINAL"`, `"is\u005ffinal"`} {
		for _, burst := range []bool{false, true} {
			id := fmt.Sprintf("folded-%d-%t", i, burst)
			w := e.running(t, id)
			var text []byte
			if burst {
				f := w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "a"})
				text, _ = json.Marshal(f)
				w.seq++
			} else {
				w.text("a") // frame 0
			}
			f := w.frame(e2a.KindComplete, true, e2a.StatusSucceeded, e2a.CompleteBody{Result: "done"}) // frame 1
			final, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			final = bytes.Replace(final, []byte(`"is_final"`), []byte(key), 1)
			if burst {
				publishRaw(t, e.js, id, 0, "2", bytes.Join([][]byte{text, final}, []byte("\n")), 0)
			} else {
				publishRaw(t, e.js, id, 1, "", final, w.lastSeq)
			}
			for _, from := range []int64{0, 1, 2, 7} {
				for _, m := range decodeModes {
					frames, err := collect(t, ctx, e.nc, id, from, m.opts...)
					if want := max(0, 2-int(from)); err != nil || len(frames) != want {
						t.Errorf("key %s, burst %t, %s from %d: %v after %d frames, want %d frames and the end", key, burst, m.name, from, err, len(frames), want)
					}
				}
			}
		}
	}
}

func TestReplayContextCancel(t *testing.T) {
	e := startEnv(t)
	e.submit(t, newEnvelope("req_c"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := collect(t, ctx, e.nc, "req_c", 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// TestReplaySeam opens readers at random moments while frames are being
// written: every reader must see every frame from its resume point exactly
// once, in order, whether it came from the stream, the live subject, or
// both.
func TestReplaySeam(t *testing.T) {
	e := startEnv(t)
	const requests, frames, readers = 8, 40, 6
	var wg sync.WaitGroup
	errs := make(chan error, requests*readers)
	for i := 0; i < requests; i++ {
		id := fmt.Sprintf("seam_%d", i)
		env := newEnvelope(id)
		e.submit(t, env)
		w := e.writer(t, env)
		nc := e.conn(t)
		for j := 0; j < readers; j++ {
			wg.Add(1)
			from := int64(0)
			if j%2 == 1 {
				from = int64(rand.IntN(frames))
			}
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond) // the behaviour: readers join at random points of the write
				got, err := collect(t, context.Background(), nc, id, from, WithBatch(3, 0), WithLiveBuffer(4))
				if err != nil {
					errs <- fmt.Errorf("%s from %d: %w", id, from, err)
					return
				}
				if int64(len(got)) != frames+1-from {
					errs <- fmt.Errorf("%s from %d: %d frames", id, from, len(got))
					return
				}
				for k, f := range got {
					if f.Response.Sequence != from+int64(k) {
						errs <- fmt.Errorf("%s from %d: frame %d has sequence %d", id, from, k, f.Response.Sequence)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < frames; k++ {
				w.text("x")
				if k%7 == 0 {
					time.Sleep(time.Millisecond) // the behaviour: a paced writer, so readers overlap it
				}
			}
			w.complete("done")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReplaySlowReaderBoundedBuffer: a reader that consumes slowly while
// frames pour in overflows its live buffer of 1; the dropped frames are read
// again from the stream.
func TestReplaySlowReaderBoundedBuffer(t *testing.T) {
	e := startEnv(t)
	env := newEnvelope("req_slow")
	e.submit(t, env)
	w := e.writer(t, env)
	r, err := Open(context.Background(), e.nc, "req_slow", 0, WithLiveBuffer(1), WithBatch(4, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e.async(func() {
		for i := 0; i < 100; i++ {
			w.text("y")
		}
		w.complete("done")
	})
	var c e2a.SequenceChecker
	for {
		f, err := r.Next(context.Background())
		if err != nil {
			if c.Done() {
				break
			}
			t.Fatal(err)
		}
		if err := c.Add(f.Response); err != nil {
			t.Fatal(err)
		}
		if f.Response.Sequence%10 == 0 {
			time.Sleep(2 * time.Millisecond) // the behaviour: a reader slower than the writer
		}
		if len(r.queue) > 4 || cap(r.live) != 1 {
			t.Fatalf("reader holds %d queued frames", len(r.queue))
		}
	}
	if c.Next() != 101 {
		t.Fatalf("got %d frames", c.Next())
	}
}

// TestReplayWithoutLive: with no republish at all, the poll still brings
// every frame.
func TestReplayWithoutLive(t *testing.T) {
	e := startEnv(t, envOpts{noRepublish: true})
	env := newEnvelope("req_poll")
	e.submit(t, env)
	w := e.writer(t, env)
	wait, waited := waiting()
	e.async(func() {
		<-waited // the reader found nothing stored: only the poll can bring the frames
		w.text("a")
		w.complete("a")
	})
	frames, err := collect(t, context.Background(), e.nc, "req_poll", 0, WithPollInterval(30*time.Millisecond), wait)
	if err != nil {
		t.Fatal(err)
	}
	checkSeq(t, frames, 0, true)
	if len(frames) != 2 {
		t.Fatalf("%d frames", len(frames))
	}
}

// The before-wait function runs when the reader has delivered what it has
// and is about to block, before the next frame exists: it is what flushes a
// stream's response. (No poll can stand in for it here: the first poll is
// an hour away.)
// waitFunc is waitHooks whose BeforeWait is the function (no head hold).
type waitFunc func() error

func (f waitFunc) BeforeWait() error   { return f() }
func (f waitFunc) HeadHoldOver() error { return nil }

func TestReaderBeforeWait(t *testing.T) {
	e := startEnv(t)
	env := newEnvelope("req_bw")
	e.submit(t, env)
	w := e.writer(t, env)
	w.text("a")
	waiting := make(chan struct{}, 8)
	r, err := Open(context.Background(), e.nc, "req_bw", 0, WithPollInterval(time.Hour),
		func(c *replayConfig) error { c.firstPoll = time.Hour; return nil },
		withWaitHooks(waitFunc(func() error { waiting <- struct{}{}; return nil }), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if f, err := r.Next(context.Background()); err != nil || f.Response.Sequence != 0 {
		t.Fatalf("frame 0: %v", err)
	}
	if len(waiting) != 0 {
		t.Fatal("before-wait ran while a frame was at hand")
	}
	next := make(chan error, 1)
	go func() {
		f, err := r.Next(context.Background())
		if err == nil && f.Response.Sequence != 1 {
			err = fmt.Errorf("frame %d, want 1", f.Response.Sequence)
		}
		next <- err
	}()
	// The reader is idle: only then is frame 1 written.
	testkit.Receive(t, waiting, 10*time.Second, "the reader blocked without running its before-wait function")
	w.complete("a")
	if err := <-next; err != nil {
		t.Fatal(err)
	}
}

// Live frames the subscription dropped (its buffer full) are read again
// from the stream at once, even when nothing after them reveals a gap:
// here the final frame is among them and the polls are an hour away.
func TestReaderRecoversDroppedFinal(t *testing.T) {
	e := startEnv(t)
	env := newEnvelope("req_drop")
	e.submit(t, env)
	w := e.writer(t, env)
	r, err := Open(context.Background(), e.nc, "req_drop", 0, WithLiveBuffer(1), WithPollInterval(time.Hour),
		func(c *replayConfig) error { c.firstPoll = time.Hour; return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 3 {
		w.text("x")
	}
	w.complete("done")
	// Every frame is acknowledged, so republished to the reader's
	// connection before the pong of this flush: all are taken or dropped.
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.sub.Dropped(); n < 3 {
		t.Fatalf("%d live frames dropped, want at least 3", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	readChecked(t, ctx, r, nil)
}

// An open reader costs no goroutine: the live subscription delivers into
// the reader's channel from the connection's own reader. (Many idle SSE
// clients hold as many readers; the Service's share one direct getter.)
func TestReaderNoGoroutine(t *testing.T) {
	e := startEnv(t)
	mux, err := streams.NewDirectGetter(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	var readers []*Reader
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	for i := range 50 {
		id := fmt.Sprintf("req_g%d", i)
		e.submit(t, newEnvelope(id))
		r, err := Open(context.Background(), e.nc, id, 0, withMux(mux))
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	before := runtime.NumGoroutine()
	for i := range 50 {
		id := fmt.Sprintf("req_h%d", i)
		e.submit(t, newEnvelope(id))
		r, err := Open(context.Background(), e.nc, id, 0, withMux(mux))
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	if after := runtime.NumGoroutine(); after-before >= 10 {
		t.Fatalf("50 more open readers took %d more goroutines", after-before)
	}
}

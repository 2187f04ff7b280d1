package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// benchEnv holds finished requests of 8 frames each (7 chunks + complete),
// written with async publishes to keep set-up short.
type benchEnv struct {
	*testEnv
	ids []string
}

// benchFrames is the number of frames per request (the performance
// target's 8); E2A_BENCH_REQUESTS sets how many finished requests the
// stream holds (default 4000).
const benchFrames = 8

func benchRequests() int {
	if n, err := strconv.Atoi(os.Getenv("E2A_BENCH_REQUESTS")); err == nil && n > 0 {
		return n
	}
	return 4000
}

func setupBench(b *testing.B) *benchEnv {
	e := startEnv(b)
	be := &benchEnv{testEnv: e}
	ctx := context.Background()
	for i := 0; i < benchRequests(); i++ {
		id := fmt.Sprintf("bench_%06d", i)
		be.ids = append(be.ids, id)
		env := newEnvelope(id)
		data, _ := json.Marshal(env)
		rs, _ := subjects.Request("demo", id)
		if _, err := e.js.PublishAsync(rs, data); err != nil {
			b.Fatal(err)
		}
		drain(b, e.js)
		w := &writer{env: env, clock: time.Now()}
		subj, _ := subjects.Response(id)
		for k := 0; k < benchFrames; k++ {
			var f *e2a.Response
			if k == benchFrames-1 {
				f = w.frame(e2a.KindComplete, true, e2a.StatusSucceeded, e2a.CompleteBody{Result: map[string]any{"content": "hello world"}})
			} else {
				f = w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "token "})
			}
			w.seq++
			data, _ := json.Marshal(f)
			m := nats.NewMsg(subj)
			m.Data = data
			m.Header.Set(subjects.HeaderSequence, strconv.Itoa(k))
			m.Header.Set(subjects.HeaderRequestID, id)
			if _, err := e.js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		drain(b, e.js)
	}
	testkit.Receive(b, e.js.PublishAsyncComplete(), 60*time.Second, "publish stalled")
	_ = ctx
	return be
}

func reportRates(b *testing.B, frames int64) {
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/s, "opens/s")
	b.ReportMetric(float64(frames)/s, "frames/s")
}

// BenchmarkReplayFinished compares, in one run, readers of finished
// requests: direct gets through the shared reply inbox (what egress uses),
// direct gets through streams.DirectGetBatch (a subscription per call),
// and an ordered consumer per reader.
func BenchmarkReplayFinished(b *testing.B) {
	be := setupBench(b)
	ctx := context.Background()
	mux, err := streams.NewDirectGetter(be.nc)
	if err != nil {
		b.Fatal(err)
	}
	defer mux.Close()
	run := func(b *testing.B, opts ...ReplayOption) {
		var frames int64
		for i := 0; b.Loop(); i++ {
			err := Replay(ctx, be.nc, be.ids[i%len(be.ids)], 0, func(render.Frame) error { frames++; return nil }, append(opts, WithoutRequestCheck())...)
			if err != nil {
				b.Fatal(err)
			}
		}
		if frames != int64(b.N)*benchFrames {
			b.Fatalf("%d frames for %d reads", frames, b.N)
		}
		reportRates(b, frames)
	}
	b.Run("direct-get-shared-inbox", func(b *testing.B) { run(b, withMux(mux)) })
	b.Run("direct-get-streams-pkg", func(b *testing.B) {
		run(b, withMux(mux), func(c *replayConfig) error { c.get = streamsGetter(be.nc); return nil })
	})
	b.Run("ordered-consumer", func(b *testing.B) {
		var frames int64
		for i := 0; b.Loop(); i++ {
			n, err := orderedRead(ctx, be.js, be.ids[i%len(be.ids)])
			if err != nil {
				b.Fatal(err)
			}
			frames += n
		}
		reportRates(b, frames)
	})
}

// BenchmarkReplayFinishedParallel: the same on 8 concurrent readers.
func BenchmarkReplayFinishedParallel(b *testing.B) {
	be := setupBench(b)
	ctx := context.Background()
	mux, err := streams.NewDirectGetter(be.nc)
	if err != nil {
		b.Fatal(err)
	}
	defer mux.Close()
	var next atomic.Int64
	run := func(b *testing.B, read func(id string) (int64, error)) {
		var frames atomic.Int64
		b.SetParallelism(4) // × GOMAXPROCS goroutines
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n, err := read(be.ids[int(next.Add(1))%len(be.ids)])
				if err != nil {
					b.Error(err)
					return
				}
				frames.Add(n)
			}
		})
		reportRates(b, frames.Load())
	}
	b.Run("direct-get-shared-inbox", func(b *testing.B) {
		run(b, func(id string) (int64, error) {
			var n int64
			err := Replay(ctx, be.nc, id, 0, func(render.Frame) error { n++; return nil }, withMux(mux), WithoutRequestCheck())
			return n, err
		})
	})
	b.Run("ordered-consumer", func(b *testing.B) {
		run(b, func(id string) (int64, error) { return orderedRead(ctx, be.js, id) })
	})
}

// orderedRead reads a request to its final frame with an ordered consumer.
func orderedRead(ctx context.Context, js jetstream.JetStream, id string) (int64, error) {
	subj, _ := subjects.Response(id)
	c, err := js.OrderedConsumer(ctx, DefaultResponsesStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return 0, err
	}
	it, err := c.Messages()
	if err != nil {
		return 0, err
	}
	defer func() {
		// A reader must remove its consumer: waiting for the inactivity
		// threshold piles consumers up (the server caps them).
		it.Stop()
		if info := c.CachedInfo(); info != nil {
			_ = js.DeleteConsumer(ctx, DefaultResponsesStream, info.Name)
		}
	}()
	var n int64
	for {
		m, err := it.Next()
		if err != nil {
			return n, err
		}
		var r e2a.Response
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			return n, err
		}
		n++
		if r.IsFinal {
			return n, nil
		}
	}
}

// BenchmarkReplayLive: frames/s through the live path, a reader following
// a writer that publishes as fast as the stream acknowledges.
func BenchmarkReplayLive(b *testing.B) {
	e := startEnv(b)
	ctx := context.Background()
	id := "live_bench"
	e.submit(b, newEnvelope(id))
	subj, _ := subjects.Response(id)
	frames := b.N
	done := make(chan error, 1)
	r, err := Open(ctx, e.nc, id, 0, WithMaxWait(10*time.Second, 10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ResetTimer()
	go func() {
		w := &writer{env: newEnvelope(id), clock: time.Now()}
		for k := 0; k <= frames; k++ {
			var f *e2a.Response
			if k == frames {
				f = w.frame(e2a.KindComplete, true, e2a.StatusSucceeded, e2a.CompleteBody{Result: "x"})
			} else {
				f = w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "token "})
			}
			w.seq++
			data, _ := json.Marshal(f)
			m := nats.NewMsg(subj)
			m.Data = data
			m.Header.Set(subjects.HeaderSequence, strconv.Itoa(k))
			if _, err := e.js.PublishMsgAsync(m); err != nil {
				done <- err
				return
			}
			drain(b, e.js)
		}
		done <- nil
	}()
	n := 0
	for {
		f, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if f.Response.Sequence != int64(n) {
			b.Fatalf("sequence %d, want %d", f.Response.Sequence, n)
		}
		n++
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkHTTPSSEFinished: SSE stream opens/s of finished requests end to
// end through net/http (client and server in this process).
func BenchmarkHTTPSSEFinished(b *testing.B) {
	be := setupBench(b)
	svc, err := New(be.nc)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	mux := http.NewServeMux()
	svc.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next atomic.Int64
	var frames atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 32<<10)
		for pb.Next() {
			id := be.ids[int(next.Add(1))%len(be.ids)]
			resp, err := client.Get(srv.URL + "/v1/requests/" + id + "/stream")
			if err != nil {
				b.Error(err)
				return
			}
			for {
				_, err := resp.Body.Read(buf)
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			frames.Add(benchFrames)
		}
	})
	reportRates(b, frames.Load())
}

// drain waits for the acknowledgements when many publishes are in flight.
func drain(b testing.TB, js jetstream.JetStream) {
	if js.PublishAsyncPending() < 1000 {
		return
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		b.Error("publish stalled")
	}
}

// BenchmarkFrameDecode: what a reader spends per frame decoding it whole
// (Open, Replay, protocol renderers) against decoding only its head (the
// E2A pass-through renderers of the Service).
func BenchmarkFrameDecode(b *testing.B) {
	w := &writer{env: newEnvelope("decode_bench"), clock: time.Now()}
	data, err := json.Marshal(w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: strings.Repeat("token ", 16)}))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var r e2a.Response
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		b.ReportAllocs()
		var h render.Head
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := h.Decode(data); err != nil || h.Sequence == render.NoSequence {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReaderAccept: what a reader spends on one stored message, with
// no network: the head scan (lazy, the E2A pass-through readers) or the
// whole decode, the checks and the queueing; of one frame, or of a burst
// of benchFrames frames in one message.
func BenchmarkReaderAccept(b *testing.B) {
	w := &writer{env: newEnvelope("accept_bench"), clock: time.Now()}
	var burst []byte
	for w.seq = 0; w.seq < benchFrames; w.seq++ {
		data, err := json.Marshal(w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: strings.Repeat("token ", 16)}))
		if err != nil {
			b.Fatal(err)
		}
		burst = e2a.AppendBurst(burst, data)
	}
	single, _ := e2a.NextInBurst(burst)
	for _, c := range []struct {
		name   string
		frames int
	}{{"single", 1}, {"burst", benchFrames}} {
		hdr := nats.Header{}
		hdr.Set(subjects.HeaderSequence, "0")
		data := single
		if c.frames > 1 {
			hdr.Set(subjects.HeaderFrames, strconv.Itoa(c.frames))
			data = burst
		}
		for _, lazy := range []bool{true, false} {
			name := c.name + "-" + map[bool]string{true: "head", false: "decode"}[lazy]
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				r := &Reader{cfg: defaultReplayConfig(), requestID: "accept_bench"}
				r.cfg.lazy = lazy
				for b.Loop() {
					r.queue, r.head, r.next, r.lastSeq = r.queue[:0], 0, 0, 0
					if err := r.accept(1, hdr, data, false); err != nil || len(r.queue) != c.frames {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

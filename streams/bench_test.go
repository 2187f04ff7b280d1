package streams_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// The benchmarks read the 9 frames of one finished request among
// benchRequests (45,000 messages in E2A_RESPONSES), as egress does on
// replay. Frames of concurrent requests interleave in the stream, and the
// server finds the next message of a subject by scanning from the previous
// one, so the cost depends on how many requests were streaming at the same
// time ("interleave"): 1 (frames contiguous), 64, and 5,000 (worst case).
const (
	benchRequests = 5000
	benchFrames   = 9
)

var benchInterleaves = []int{1, 64, benchRequests}

// fillWaves publishes benchFrames frames for each of requests requests, in
// waves of wave requests whose frames interleave round-robin.
func fillWaves(b *testing.B, js jetstream.JetStream, requests, wave int) {
	b.Helper()
	n := 0
	for start := 0; start < requests; start += wave {
		for f := range benchFrames {
			for r := start; r < min(start+wave, requests); r++ {
				id := "req-" + strconv.Itoa(r)
				subj, _ := subjects.Response(id)
				m := nats.NewMsg(subj)
				m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID(id, int64(f)))
				m.Header.Set(subjects.HeaderSequence, strconv.Itoa(f))
				m.Data = fmt.Appendf(nil, `{"request_id":%q,"sequence":%d,"payload":"0123456789abcdef0123456789abcdef"}`, id, f)
				if _, err := js.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
				if n++; n%1000 == 0 {
					waitAsync(b, js)
				}
			}
		}
	}
	waitAsync(b, js)
}

func benchSubject(i int) string {
	s, _ := subjects.Response("req-" + strconv.Itoa(i%benchRequests))
	return s
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

func BenchmarkDirectGetBatch(b *testing.B) {
	for _, il := range benchInterleaves {
		b.Run("interleave="+strconv.Itoa(il), func(b *testing.B) {
			_, nc, js := startApplied(b)
			fillWaves(b, js, benchRequests, il)
			ctx := context.Background()
			b.Run("serial", func(b *testing.B) {
				i := 0
				for b.Loop() {
					msgs, more, err := streams.DirectGetBatch(ctx, nc, streams.ResponsesStream, benchSubject(i), 0, 16)
					if err != nil || more || len(msgs) != benchFrames {
						b.Fatalf("%d msgs, more %v, %v", len(msgs), more, err)
					}
					i += 7
				}
				reportRate(b)
			})
			b.Run("parallel", func(b *testing.B) {
				var n atomic.Int64
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(n.Add(7))
						msgs, _, err := streams.DirectGetBatch(ctx, nc, streams.ResponsesStream, benchSubject(i), 0, 16)
						if err != nil || len(msgs) != benchFrames {
							b.Errorf("%d msgs, %v", len(msgs), err)
							return
						}
					}
				})
				reportRate(b)
			})
		})
	}
}

// BenchmarkOrderedConsumerRead creates an ordered consumer per read, fetches
// the 9 frames and deletes the consumer.
func BenchmarkOrderedConsumerRead(b *testing.B) {
	for _, il := range benchInterleaves {
		b.Run("interleave="+strconv.Itoa(il), func(b *testing.B) {
			_, _, js := startApplied(b)
			fillWaves(b, js, benchRequests, il)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				cons, err := js.OrderedConsumer(ctx, streams.ResponsesStream, jetstream.OrderedConsumerConfig{
					FilterSubjects: []string{benchSubject(i)},
				})
				if err != nil {
					b.Fatal(err)
				}
				batch, err := cons.Fetch(benchFrames, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for range batch.Messages() {
					n++
				}
				if n != benchFrames {
					b.Fatalf("read %d frames", n)
				}
				if err := js.DeleteConsumer(ctx, streams.ResponsesStream, cons.CachedInfo().Name); err != nil {
					b.Fatal(err)
				}
				i += 7
			}
			reportRate(b)
		})
	}
}

// BenchmarkLastBySubject measures the existence check.
func BenchmarkLastBySubject(b *testing.B) {
	_, nc, js := startApplied(b)
	fillWaves(b, js, benchRequests, 64)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := streams.LastBySubject(ctx, nc, streams.ResponsesStream, benchSubject(i)); err != nil {
			b.Fatal(err)
		}
		i += 7
	}
	reportRate(b)
}

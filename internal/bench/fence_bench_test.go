package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// BenchmarkFencedFrames measures what writing one request's 8 frames (900 B
// each) costs the embedded server and its client, per way of fencing them
// (go test -run '^$' -bench FencedFrames ./internal/bench). Each op is one
// request; 64 requests run at once (GOMAXPROCS 2). It reports requests/s
// and the process's CPU per request (server and client together).
//
//   - sequential: what the agent does — each frame carries the subject's
//     expected last sequence, the previous frame's, so one is in flight at a
//     time (8 PubAcks).
//   - atomic-batch: the first frame fenced, the other 7 in one atomic batch
//     (all or none); an R1 file stream stages every batch in a file store of
//     its own.
//   - lease-fast-batch: the 8 frames in one fast batch (gap-fail: after a
//     refused frame the server stores none of the batch's later ones), each
//     fenced on a lease subject's last sequence
//     (Nats-Expected-Last-Subject-Sequence-Subject), which a redelivered
//     worker writes before its first frame; the lease is written here
//     before every request (a first delivery expects it empty instead).
//
// The agent writes bursts the lease-fast-batch way on a stream of one
// replica (agent/batch.go) and never uses atomic batches
// (docs/performance.md, seventh session).
func BenchmarkFencedFrames(b *testing.B) {
	_, nc := natstest.RunServer(b, natstest.WithoutStreams())
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(strings.Repeat("a", 900))
	var waiters sync.Map // fast batch id → chan of its PubAck
	if _, err := nc.Subscribe("_FB.>", func(m *nats.Msg) {
		if !strings.Contains(string(m.Data), `"stream"`) && !strings.Contains(string(m.Data), `"error"`) {
			return // a flow-control ack
		}
		if ch, ok := waiters.Load(strings.Split(m.Subject, ".")[1]); ok {
			ch.(chan *nats.Msg) <- m
		}
	}); err != nil {
		b.Fatal(err)
	}
	type mode struct {
		name    string
		cfg     func(*jetstream.StreamConfig)
		request func(subj string) error
	}
	pub := func(m *nats.Msg) (uint64, error) {
		r, err := nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			return 0, err
		}
		return pubAck(r.Data)
	}
	modes := []mode{
		{"sequential", func(*jetstream.StreamConfig) {}, func(subj string) error {
			var last uint64
			for range 8 {
				m := nats.NewMsg(subj)
				m.Data = data
				m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
				var err error
				if last, err = pub(m); err != nil {
					return err
				}
			}
			return nil
		}},
		{"atomic-batch", func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = true }, func(subj string) error {
			m := nats.NewMsg(subj)
			m.Data = data
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
			last, err := pub(m)
			if err != nil {
				return err
			}
			id := uuid.NewString()
			for f := 1; f <= 7; f++ {
				m := nats.NewMsg(subj)
				m.Data = data
				m.Header.Set("Nats-Batch-Id", id)
				m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(f))
				if f == 1 {
					m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
				}
				if f < 7 {
					if err := nc.PublishMsg(m); err != nil {
						return err
					}
					continue
				}
				m.Header.Set("Nats-Batch-Commit", "1")
				_, err = pub(m)
			}
			return err
		}},
		{"lease-fast-batch", func(c *jetstream.StreamConfig) { c.AllowBatchPublish = true }, func(subj string) error {
			lm := nats.NewMsg(subj + ".lease")
			lease, err := pub(lm)
			if err != nil {
				return err
			}
			id := uuid.NewString()
			done := make(chan *nats.Msg, 1)
			waiters.Store(id, done)
			defer waiters.Delete(id)
			for f := 1; f <= 8; f++ {
				m := nats.NewMsg(subj)
				m.Data = data
				m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lease, 10))
				m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, subj+".lease")
				op := 1 // append
				switch f {
				case 1:
					op = 0 // start
				case 8:
					op = 2 // commit
				}
				// <prefix>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI
				m.Reply = fmt.Sprintf("_FB.%s.16.fail.%d.%d.$FI", id, f, op)
				if err := nc.PublishMsg(m); err != nil {
					return err
				}
			}
			select {
			case r := <-done:
				_, err := pubAck(r.Data)
				return err
			case <-time.After(5 * time.Second):
				return fmt.Errorf("no PubAck for fast batch %s", id)
			}
		}},
	}
	var n atomic.Int64 // request subjects, new across runs
	for _, md := range modes {
		b.Run(md.name, func(b *testing.B) {
			name := strings.ToUpper(strings.ReplaceAll(md.name, "-", "_"))
			cfg := jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage}
			md.cfg(&cfg)
			// The function runs once per b.N the framework tries: the
			// stream stays, the subjects are new each time.
			if _, err := js.CreateOrUpdateStream(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			c0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := md.request(fmt.Sprintf("%s.%d", name, n.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
			b.ReportMetric(float64((processCPU()-c0).Microseconds())/1000/float64(b.N), "cpu-ms/request")
		})
	}
}

// pubAck returns the sequence of a PubAck, or its error.
func pubAck(data []byte) (uint64, error) {
	var a struct {
		Seq   uint64 `json:"seq"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return 0, err
	}
	if a.Error != nil {
		return 0, fmt.Errorf("%s", a.Error.Description)
	}
	return a.Seq, nil
}

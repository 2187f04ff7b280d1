package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// frame builds frame seq of id: text chunks, and a final e2a.complete.
func frame(id string, seq int64, final bool) []byte { return natstest.Frame(id, seq, final) }

// publishFrame stores a frame with the headers the agent writer sets
// (without fencing, so that tests can store broken sequences).
func publishFrame(t *testing.T, js jetstream.JetStream, id string, seq int64, data []byte) {
	t.Helper()
	publishFrameRaw(t, js, id, strconv.FormatInt(seq, 10), subjects.FrameMsgID(id, seq), data)
}

// publishFrameRaw stores a frame with the given E2A-Sequence header and
// deduplication id.
func publishFrameRaw(t *testing.T, js jetstream.JetStream, id, seqHeader, msgID string, data []byte) {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(subjects.HeaderRequestID, id)
	m.Header.Set(subjects.HeaderSequence, seqHeader)
	ack, err := js.PublishMsg(testCtx(t), m, jetstream.WithMsgID(msgID))
	if err != nil {
		t.Fatalf("publish frame %s of %q: %v", seqHeader, id, err)
	}
	if ack.Duplicate {
		t.Fatalf("frame %s of %q deduplicated", seqHeader, id)
	}
}

// completeRequest stores a request with n chunks and a final frame.
func completeRequest(t *testing.T, js jetstream.JetStream, pool string, env *e2a.Envelope, n int) {
	t.Helper()
	natstest.PublishRequest(t, js, pool, env)
	for i := 0; i <= n; i++ {
		publishFrame(t, js, env.RequestID, int64(i), frame(env.RequestID, int64(i), i == n))
	}
}

// collect runs Replay and returns its records.
func collect(t *testing.T, a *audit.Auditor, q audit.Query) ([]audit.Record, audit.Stats) {
	t.Helper()
	var recs []audit.Record
	st, err := a.Replay(testCtx(t), q, func(r audit.Record) error {
		// Every record must be one valid JSON line.
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("record does not encode: %v", err)
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%+v): %v", q, err)
	}
	return recs, st
}

func summaries(recs []audit.Record) map[string]*audit.Summary {
	out := map[string]*audit.Summary{}
	for _, r := range recs {
		if r.Kind == audit.KindSummary {
			out[r.RequestID] = r.Summary
		}
	}
	return out
}

func count(recs []audit.Record, kind, id string) int {
	n := 0
	for _, r := range recs {
		if r.Kind == kind && (id == "" || r.RequestID == id) {
			n++
		}
	}
	return n
}

// waitAudit waits until E2A_AUDIT holds at least n messages.
func waitAudit(t *testing.T, js jetstream.JetStream, n uint64) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("E2A_AUDIT to reach %d messages", n), func() bool {
		s, err := js.Stream(testCtx(t), streams.AuditStream)
		return err == nil && s.CachedInfo().State.Msgs >= n
	})
}

// recorder collects records from concurrent emitters.
type recorder struct {
	mu   sync.Mutex
	recs []audit.Record
	ch   chan audit.Record
	// gate, when set before the recorder is used, is called with each
	// record before it is taken (a reader that stalls).
	gate func(audit.Record)
}

func newRecorder() *recorder { return &recorder{ch: make(chan audit.Record, 1024)} }

func (r *recorder) emit(rec audit.Record) error {
	if r.gate != nil {
		r.gate(rec)
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	r.ch <- rec
	return nil
}

// waitFor waits for a record satisfying ok.
func (r *recorder) waitFor(t *testing.T, what string, ok func(audit.Record) bool) audit.Record {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case rec := <-r.ch:
			if ok(rec) {
				return rec
			}
		case <-timeout:
			t.Fatalf("no %s record", what)
		}
	}
}

func server(t *testing.T) (jetstream.JetStream, *nats.Conn) {
	_, nc := natstest.RunServer(t)
	return natstest.JetStream(t, nc), nc
}

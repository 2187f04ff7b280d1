package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestReplayAutoAtTheHotBoundary: with SourceAuto, scanAudit stops accepting
// requests at the first audit copy stored after the hot stream's first
// time. A copy's store time is its copy time, later than the original's:
// a request that has just aged out of E2A_REQUESTS, stored a moment before
// the hot stream's first request, has its copy stored after that time and
// is missed by a time scan (found by neither stream).
func TestReplayAutoAtTheHotBoundary(t *testing.T) {
	js, nc := server(t)
	a, _ := audit.New(nc)
	start := time.Now()
	// Two requests back to back (as under load): their copies trail them.
	var futs []jetstream.PubAckFuture
	for _, id := range []string{"aged", "kept"} {
		subj, _ := subjects.Request("demo", id)
		env, _ := e2a.MarshalEnvelope(&e2a.Envelope{RequestID: id, TaskID: "task-b"})
		f, err := js.PublishAsync(subj, env, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	var seqKept uint64
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			if i == 1 {
				seqKept = ack.Sequence
			}
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	for _, id := range []string{"aged", "kept"} {
		publishFrame(t, js, id, 0, frame(id, 0, true))
	}
	waitAudit(t, js, 4)
	// "aged" leaves E2A_REQUESTS as its max age would take it.
	s, err := js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(context.Background(), jetstream.WithPurgeSequence(seqKept)); err != nil {
		t.Fatal(err)
	}
	recs, _ := collect(t, a, audit.Query{Since: start, TaskID: "task-b"})
	sums := summaries(recs)
	if sums["aged"] == nil || sums["kept"] == nil {
		t.Fatalf("scan found %v, want aged (from E2A_AUDIT) and kept (hot)", keys(sums))
	}
}

func keys(m map[string]*audit.Summary) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

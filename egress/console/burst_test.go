package console_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestProgressFromBursts: a request's progress read from frames the agent
// stored in bursts (several frames in one response message): the last frame
// of the last message gives the state and the frame count, the first
// message's time the first frame's, whether frame 0 came alone or in the
// last message itself.
func TestProgressFromBursts(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	ctx := t.Context()
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id string, seq int, final bool, status, kind, body string) []byte {
		return fmt.Appendf(nil, `{"response_id":"r%d","request_id":%q,"sequence":%d,"is_final":%v,"status":%q,"response_kind":%q,"body":%s}`,
			seq, id, seq, final, status, kind, body)
	}
	chunk := func(id string, seq int) []byte {
		return frame(id, seq, false, "in_progress", "e2a.chunk", `{"delta_kind":"text","delta":"x"}`)
	}
	lookup := func(id string) *console.Entry {
		t.Helper()
		var e *console.Entry
		waitFor(t, 10*time.Second, "the request indexed", func() bool {
			e, err = p.con.Lookup(ctx, id)
			return err == nil && e != nil
		})
		waitIndexed(t, p, id)
		return e
	}
	submit := func(id string) {
		t.Helper()
		subj, _ := subjects.Request("idle", id)
		if _, err := js.Publish(ctx, subj, fmt.Appendf(nil, `{"protocol_version":"1.0","request_id":%q,"method":"x","params":{}}`, id)); err != nil {
			t.Fatal(err)
		}
	}

	// A request running, then failed: frames 0..2 in one burst, then 3..5
	// ending with the final error frame.
	const failed = "progress-burst-1"
	submit(failed)
	last := natstest.PublishBurst(t, p.nc, failed, 0, 0, chunk(failed, 0), chunk(failed, 1), chunk(failed, 2))
	e := lookup(failed)
	if e.Status != console.StatusRunning || e.Frames != 3 || e.FirstFrame == nil || e.Finished != nil {
		t.Fatalf("running after a first burst: %+v", e)
	}
	first := *e.FirstFrame
	natstest.PublishBurst(t, p.nc, failed, 3, last, chunk(failed, 3), chunk(failed, 4),
		frame(failed, 5, true, "failed", "e2a.error", `{"code":"quota","message":"no","retryable":false}`))
	if e = lookup(failed); e.Status != console.StatusFailed || e.ErrorCode != "quota" || e.Frames != 6 || e.Finished == nil ||
		!e.FirstFrame.Equal(first) || e.Finished.Before(first) || e.DurationMS == nil {
		t.Fatalf("failed by a final burst: %+v", e)
	}

	// A request that succeeded: frame 0 alone, then 1..3 ending with the
	// final frame.
	const succeeded = "progress-burst-2"
	submit(succeeded)
	last = natstest.PublishBurst(t, p.nc, succeeded, 0, 0, chunk(succeeded, 0))
	natstest.PublishBurst(t, p.nc, succeeded, 1, last, chunk(succeeded, 1), chunk(succeeded, 2),
		frame(succeeded, 3, true, "succeeded", "e2a.complete", `{"result":"ok"}`))
	if e = lookup(succeeded); e.Status != console.StatusSucceeded || e.Frames != 4 || e.FirstFrame == nil || e.Finished == nil ||
		e.Finished.Before(*e.FirstFrame) || e.ErrorCode != "" {
		t.Fatalf("succeeded by a final burst: %+v", e)
	}

	pg, err := p.con.List(ctx, console.Query{Status: console.StatusFailed})
	if err != nil || len(pg.Entries) != 1 || pg.Entries[0].RequestID != failed {
		t.Fatalf("status filter: %+v %v", pg, err)
	}
	pg, err = p.con.List(ctx, console.Query{Status: console.StatusSucceeded})
	if err != nil || len(pg.Entries) != 1 || pg.Entries[0].RequestID != succeeded {
		t.Fatalf("status filter: %+v %v", pg, err)
	}
}

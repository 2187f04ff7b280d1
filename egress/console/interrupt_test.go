package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
)

// TestIndexInterrupted: a request whose turn ends asking for input (or for
// authorization) is listed in that state, not succeeded, and the status
// filter finds it.
func TestIndexInterrupted(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	ctx := context.Background()
	in := p.submit(t, `{"task_id":"task-ask","params":{"text":"the weather","ask":"input"}}`)
	au := p.submit(t, `{"params":{"text":"ask:auth the calendar"}}`)
	done := p.submit(t, `{"params":{"text":"plain"}}`)
	want := map[string]string{in: console.StatusInputRequired, au: console.StatusAuthRequired, done: console.StatusSucceeded}
	got := map[string]console.Entry{}
	waitFor(t, 20*time.Second, "the three requests final in the index", func() bool {
		for id, st := range want {
			e, err := p.con.Lookup(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if e != nil && e.Status == st {
				got[id] = *e
			}
		}
		return len(got) == len(want)
	})
	waitIndexed(t, p, in, au, done)
	if e := got[in]; e.Frames != 3 || e.Finished == nil || e.ErrorCode != "" || e.TaskID != "task-ask" {
		t.Fatalf("input-required entry %+v", e)
	}
	for st, id := range map[string]string{console.StatusInputRequired: in, console.StatusAuthRequired: au} {
		pg, err := p.con.List(ctx, console.Query{Status: st})
		if err != nil || len(pg.Entries) != 1 || pg.Entries[0].RequestID != id {
			t.Fatalf("status %s: %+v %v", st, pg.Entries, err)
		}
	}
}

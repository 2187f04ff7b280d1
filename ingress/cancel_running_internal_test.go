package ingress

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestMarkCancelled: the mark of a running turn that tasks/cancel
// cancels (markCancelled) is a compare-and-set on the record's newest
// request; while the marked turn is the newest an A2A message is refused
// as to a terminal task (ErrTaskTerminal); the mark is taken back only
// by its own request (unmarkCancelled), then the task takes messages
// again. A task named by its first request gets its record from the
// mark; another principal may not mark it.
func TestMarkCancelled(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	alice, bob := tenant.Principal{ID: "alice"}, tenant.Principal{ID: "bob"}
	a2a := TaskRecord{ID: "t-1", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	open := turnCond{open: true}
	ids := func(id string) string {
		t.Helper()
		rec, err := ts.Get(ctx, KindTask, id)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(rec.RequestIDs, " ") + " cancel:" + rec.CancelTurn
	}
	appendTurn := func(base TaskRecord, id string) error {
		t.Helper()
		_, _, err := ts.appendAfter(ctx, KindTask, base, id, alice, open)
		return err
	}

	if _, err := ts.AppendNew(ctx, KindTask, a2a, "ask", alice); err != nil {
		t.Fatal(err)
	}
	if err := ts.markCancelled(ctx, "t-1", "earlier", alice); !errors.Is(err, errRecordMoved) {
		t.Errorf("a mark after a request that is not the newest: %v, want errRecordMoved", err)
	}
	if err := ts.markCancelled(ctx, "t-1", "ask", bob); !errors.Is(err, ErrTaskNotFound) {
		t.Errorf("another principal's mark: %v, want ErrTaskNotFound", err)
	}
	if err := ts.markCancelled(ctx, "t-1", "ask", alice); err != nil {
		t.Fatalf("the mark: %v", err)
	}
	if err := ts.markCancelled(ctx, "t-1", "ask", alice); err != nil {
		t.Errorf("the mark again: %v", err)
	}
	if err := appendTurn(a2a, "answer"); !errors.Is(err, ErrTaskTerminal) {
		t.Errorf("an A2A turn after the marked turn: %v, want ErrTaskTerminal", err)
	}
	if err := ts.unmarkCancelled(ctx, "t-1", "other"); err != nil {
		t.Fatal(err)
	}
	if got := ids("t-1"); got != "ask cancel:ask" {
		t.Errorf("record %q, want the mark kept (another request's unmark)", got)
	}
	if err := ts.unmarkCancelled(ctx, "t-1", "ask"); err != nil {
		t.Fatal(err)
	}
	if err := appendTurn(a2a, "answer"); err != nil {
		t.Errorf("an A2A turn once the mark was taken back: %v", err)
	}
	if got := ids("t-1"); got != "ask answer cancel:" {
		t.Errorf("record %q", got)
	}

	publishFirstTurn(t, js, "t-2", "alice", "ask")
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	first := TaskRecord{ID: "t-2", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	if err := ts.markCancelled(ctx, "t-2", "t-2", bob); !errors.Is(err, ErrTaskNotFound) {
		t.Errorf("another principal's mark of a task without a record: %v, want ErrTaskNotFound", err)
	}
	if rec, err := ts.recorded(ctx, KindTask, "t-2"); err != nil || rec != nil {
		t.Fatalf("a refused mark wrote a record: %v %v", rec, err)
	}
	if err := ts.markCancelled(ctx, "t-2", "t-2", alice); err != nil {
		t.Fatalf("the mark of a task without a record: %v", err)
	}
	if got := ids("t-2"); got != "t-2 cancel:t-2" {
		t.Errorf("record %q, want the first turn marked", got)
	}
	if err := appendTurn(first, "answer-2"); !errors.Is(err, ErrTaskTerminal) {
		t.Errorf("an A2A turn after the marked first turn: %v, want ErrTaskTerminal", err)
	}
	if err := ts.markCancelled(ctx, "t-3", "t-3", alice); !errors.Is(err, ErrTaskNotFound) {
		t.Errorf("the mark of no task: %v, want ErrTaskNotFound", err)
	}
}

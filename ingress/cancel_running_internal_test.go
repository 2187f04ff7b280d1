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

// TestMarkMetAwaitsItsTurn: an A2A message that meets the mark of a
// running turn (CancelMarked) is refused with markedError, which names
// the marked turn (appendPastMark awaits its end) and is ErrTaskTerminal;
// appended past that turn's mark (turnCond.overMark: it ended
// interrupted), it is taken and the mark taken off; the mark of another
// turn still refuses. A cancel turn's mark is not CancelMarked: it refuses
// at once, whatever overMark names. markStands follows the mark.
func TestMarkMetAwaitsItsTurn(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	alice := tenant.Principal{ID: "alice"}
	base := TaskRecord{ID: "t-1", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	if _, err := ts.AppendNew(ctx, KindTask, base, "ask", alice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.appendAfter(ctx, KindTask, base, "a1", alice, turnCond{open: true}); err != nil {
		t.Fatal(err)
	}
	if err := ts.markCancelled(ctx, "t-1", "a1", alice); err != nil {
		t.Fatal(err)
	}
	if ok, err := ts.markStands(ctx, KindTask, "t-1", "a1"); err != nil || !ok {
		t.Errorf("markStands of the marked turn: %v %v, want true", ok, err)
	}
	var m markedError
	_, _, err := ts.appendAfter(ctx, KindTask, base, "a2", alice, turnCond{open: true})
	if !errors.As(err, &m) || m.turn != "a1" || !errors.Is(err, ErrTaskTerminal) {
		t.Fatalf("an A2A turn meeting the mark: %v, want markedError of a1 (ErrTaskTerminal)", err)
	}
	if _, _, err := ts.appendAfter(ctx, KindTask, base, "a2", alice, turnCond{open: true, overMark: "ask"}); !errors.As(err, &m) {
		t.Errorf("an A2A turn past another turn's mark: %v, want markedError", err)
	}
	if _, added, err := ts.appendAfter(ctx, KindTask, base, "a2", alice, turnCond{open: true, overMark: "a1"}); err != nil || !added {
		t.Fatalf("an A2A turn past the void mark of a1: %v %v, want it appended", added, err)
	}
	rec, err := ts.Get(ctx, KindTask, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.RequestIDs, " "); got != "ask a1 a2" || rec.CancelTurn != "" || rec.CancelMarked {
		t.Errorf("record %q cancel %q marked %v, want ask a1 a2, the mark taken off", got, rec.CancelTurn, rec.CancelMarked)
	}
	if ok, err := ts.markStands(ctx, KindTask, "t-1", "a1"); err != nil || ok {
		t.Errorf("markStands once taken off: %v %v, want false", ok, err)
	}

	// A cancel turn after a2 (as cancelInterrupted appends it).
	if _, _, err := ts.appendAfter(ctx, KindTask, base, "c", alice, turnCond{after: "a2", cancel: true}); err != nil {
		t.Fatal(err)
	}
	_, _, err = ts.appendAfter(ctx, KindTask, base, "a3", alice, turnCond{open: true, overMark: "c"})
	if !errors.Is(err, ErrTaskTerminal) || errors.As(err, &m) {
		t.Errorf("an A2A turn after a cancel turn: %v, want ErrTaskTerminal at once (no markedError)", err)
	}
	if err := ts.markCancelled(ctx, "t-1", "c", alice); err != nil {
		t.Fatal(err)
	}
	if rec, err := ts.Get(ctx, KindTask, "t-1"); err != nil || rec.CancelTurn != "c" || rec.CancelMarked {
		t.Errorf("a cancel turn marked by a later cancel: %+v %v, want its cancel turn kept, not CancelMarked", rec, err)
	}
}

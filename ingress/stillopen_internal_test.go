package ingress

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestStillOpenSecondTurnOfFirstRequestTask: stillOpen (b47375d) refuses
// a turn only when the turn before it ended the task before this turn's
// record revision was stored; "ended after, the stream read the record
// with this turn in it and follows it" (docs/design.md). The second turn
// of a task named by its first request creates the record (appendAfter's
// kv create path), which never sets TaskRecord.rev (only update does), so
// appendedAt returns the zero time and endedBefore refuses the turn as to
// a finished task whatever the order: the first turn's stream and push
// already followed it (submitted), and the client sending it is told
// UnsupportedOperation. The same order on a record that exists (update
// path) is accepted: the control below.
func TestStillOpenSecondTurnOfFirstRequestTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, js := newTaskStore(t)
	eg, err := egress.New(ts.nc)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{egress: eg}
	s.opts.tasks = ts
	alice := tenant.Principal{ID: "alice"}
	open := turnCond{open: true}

	// check: first turn `first` of task id stored and running; turn next
	// recorded; then first's terminal final frame stored; then stillOpen's
	// check of next.
	check := func(id, first, next string) error {
		t.Helper()
		base := TaskRecord{ID: id, Protocol: "a2a", Pool: "demo", Principal: "alice"}
		rec, added, err := ts.appendAfter(ctx, KindTask, base, next, alice, open)
		if err != nil || !added {
			t.Fatalf("append %s to %s: added %v, %v", next, id, added, err)
		}
		natstest.PublishBurst(t, ts.nc, first, 0, 0, natstest.Frame(first, 0, true))
		return s.endedBefore(ctx, KindTask, rec, id, next)
	}

	// Control: a task whose record exists (update path).
	publishFirstTurn(t, js, "t-ctl", "alice", "ask")
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	ctl := TaskRecord{ID: "t-ctl", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	if _, _, err := ts.appendAfter(ctx, KindTask, ctl, "r-ctl-2", alice, open); err != nil {
		t.Fatal(err)
	}
	publishFirstTurn(t, js, "r-ctl-2", "alice", "two")
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	if err := check("t-ctl", "r-ctl-2", "r-ctl-3"); err != nil {
		t.Fatalf("control (record updated): %v; want the turn taken (the earlier ended after it was recorded)", err)
	}

	// The task named by its first request: its second turn creates the record.
	publishFirstTurn(t, js, "t-1", "alice", "ask")
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	if err := check("t-1", "t-1", "r-2"); err != nil {
		t.Errorf("second turn of a task named by its first request, recorded while that turn ran: %v (ErrTaskTerminal %v); "+
			"want it taken, as on a record that exists: the record's create does not set rec.rev (ingress/tasks.go appendAfter, "+
			"create path), so appendedAt is zero and endedBefore refuses (ingress/turns.go)", err, errors.Is(err, ErrTaskTerminal))
	}
}

package ingress

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestListTasksLooksUpOnlyTheCallersAgedTasks: a one-turn task whose
// request aged out of E2A_REQUESTS is listed while GetTask finds it
// (firstTurn: a frame in E2A_RESPONSES, its request in the audit
// history). That lookup was made before the owner filter, for every
// principal's aged task: bob's listing read alice's tasks' frames and
// asked the history for her requests (charged to the history's
// per-principal lookup budget), to list none of them. It is made for the
// caller's own tasks only: bob's listing looks up nothing, alice's looks
// up each of hers.
func TestListTasksLooksUpOnlyTheCallersAgedTasks(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	const n = 3
	reqs := map[string]streams.RawMsg{}
	for i := range n {
		id := fmt.Sprintf("alice-%d", i)
		publishFirstTurn(t, js, id, "alice", "x")
		frame, _ := subjects.Response(id)
		if _, err := js.PublishAsync(frame, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	for m, err := range streams.DirectGetSeq(ctx, ts.nc, streams.RequestsStream, subjects.AllRequests, 1, listPage) {
		if err != nil {
			t.Fatal(err)
		}
		_, id, _ := subjects.ParseRequest(m.Subject)
		reqs[id] = m
	}
	var mu sync.Mutex
	var looked []string
	ts.history = func(_ context.Context, id string) (streams.RawMsg, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		looked = append(looked, id)
		m, ok := reqs[id]
		return m, ok, nil
	}
	ts.turns.keepAged = true
	list := func(principal string) (ids []string, lookups []string) {
		t.Helper()
		mu.Lock()
		looked = nil
		mu.Unlock()
		owns := func(r *TaskRecord) bool { return r.Principal == principal }
		if _, err := ts.listTasks(ctx, 100, owns, func(r *TaskRecord) bool {
			ids = append(ids, r.ID)
			return false
		}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return ids, looked
	}
	if ids, _ := list("alice"); len(ids) != n {
		t.Fatalf("alice's listing before her requests aged out: %v", ids)
	}
	// Her requests age out of E2A_REQUESTS; their frames are still there.
	natstest.Purge(t, js, streams.RequestsStream)
	ts.now = func() time.Time { return time.Now().Add(ts.turns.maxAge + time.Minute) }
	if ids, lookups := list("bob"); len(ids) != 0 || len(lookups) != 0 {
		t.Errorf("bob's listing: %v, %d lookups of alice's aged tasks in the history (%s), want none", ids, len(lookups), strings.Join(lookups, " "))
	}
	if ids, lookups := list("alice"); len(ids) != n || len(lookups) != n {
		t.Errorf("alice's listing of her aged tasks: %v with %d lookups, want %d of each", ids, len(lookups), n)
	}
}

// anyOwner is listTasks' owns for a listing of every principal's tasks.
func anyOwner(*TaskRecord) bool { return true }

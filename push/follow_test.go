package push_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestQueuedTurnsEndPostedSubmitted: a stage reading the task records
// (WithTaskTurns: ingress.TaskTurns) posts the end of alice's turn "a",
// which her turn "b" queued behind it takes back, as submitted (v1.0
// status update, v0.3 Task), then "b"'s updates to the task completed:
// one completed update in all. A record of another task of hers that
// lists, after her turn, a request stored for bob under that task's id
// (another principal's request: never hers to follow) is posted
// completed, as the turn's frame says.
func TestQueuedTurnsEndPostedSubmitted(t *testing.T) {
	e := newEnv(t)
	ts, err := ingress.NewTaskStore(tctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	e.startStage(push.WithTaskTurns(e.taskTurns()))
	hooks := map[string]*receiver{}
	for _, task := range []string{"own", "foreign"} {
		for _, v := range []string{push.V1, push.V03} {
			r := newReceiver(t, nil)
			hooks[task+v] = r
			e.create("alice", push.Config{TaskID: task, URL: r.srv.URL + "/hook", Token: "tok", Version: v})
		}
	}

	// Own: "b" is queued (published after "a", recorded) before "a" ends.
	gate := uuid.NewString() // the gates are the package's
	a := e.turnWith("alice", "own", "", "a", 2, map[string]any{"gate": gate})
	recordTurn(t, ts, "own", a)
	recordTurn(t, ts, "own", e.turn("alice", "own", a, "b", 2))
	openGate(gate)
	for _, v := range []string{push.V1, push.V03} {
		got := awaitCompleted(t, v, hooks["own"+v], 1)
		var states []string
		seen := map[string]bool{}
		for _, d := range got {
			if !seen[d.eventID] {
				seen[d.eventID] = true
				states = append(states, decode(t, v, d).state)
			}
		}
		// a's chunks, its end; b's chunks, the task's end.
		want := []string{"working", "working", "submitted", "working", "working", "completed"}
		if v == push.V1 {
			want = []string{"", "", "TASK_STATE_SUBMITTED", "", "", "TASK_STATE_COMPLETED"}
		}
		if !slices.Equal(states, want) {
			t.Errorf("own %s: updates in states %q, want %q (a's end submitted, b's the task's)", v, states, want)
		}
	}

	// Foreign: bob's request, stored under task "foreign" too, listed
	// after alice's turn.
	gate = uuid.NewString()
	f := e.turnWith("alice", "foreign", "", "a", 2, map[string]any{"gate": gate})
	recordTurn(t, ts, "foreign", f)
	recordTurn(t, ts, "foreign", e.turn("bob", "foreign", "", "x", 1))
	openGate(gate)
	for _, v := range []string{push.V1, push.V03} {
		got := awaitCompleted(t, v, hooks["foreign"+v], 1)
		ordered(t, v, got, []string{"a"}, expectText([]string{"a"}, 2))
	}
}

// awaitCompleted waits until r got n completed updates of version and
// returns what it accepted.
func awaitCompleted(t *testing.T, version string, r *receiver, n int) []delivery {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, version+" task completed", func() bool {
		return completedCount(t, version, r.accepted()) >= n
	})
	return r.accepted()
}

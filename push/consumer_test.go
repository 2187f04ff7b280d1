package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestFirstStartAfterConfigs: a config made, and its task's first chunk
// stored, before the stage's consumer ever existed (ingress stores configs
// whether the stage runs or not): the stage, started then for the first
// time, delivers every update of the request, the first chunk included,
// in order (its consumer starts at the oldest config, not at the next new
// message). A config made after the stage's start and a second replica
// find the consumer as it was made.
func TestFirstStartAfterConfigs(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL})
	gate := uuid.NewString()
	id := e.turnWith("alice", "t1", "", "", 4, map[string]any{"gate": gate})
	testkit.Eventually(t, 10*time.Second, "the first chunk stored", func() bool {
		_, err := streams.LastBySubject(context.Background(), e.nc, streams.ResponsesStream, "e2a.resp."+id)
		return err == nil
	})
	e.startStage()
	e.startStage()
	openGate(gate)
	testkit.Eventually(t, 20*time.Second, "completed", func() bool { return completedCount(t, push.V1, r.accepted()) == 1 })
	ordered(t, push.V1, r.accepted(), []string{""}, "c0;c1;c2;c3;")
}

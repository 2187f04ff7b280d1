package ingress_test

import (
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestResubscribeReadsFramesOnce: tasks/resubscribe checks that the
// task's newest request is the caller's (its envelope) and serves its
// frames: they are read from E2A_RESPONSES once, as tasks/get of the task
// reads them, not once for the check and again for the stream.
func TestResubscribeReadsFramesOnce(t *testing.T) {
	p := pastDedupePipeline(t)
	c := taskCalls{t: t, p: p}
	const taskID = "task-resubscribed"
	if b := c.send(testKey, taskID, "", "three frames", `{"frames":3}`, true); !strings.Contains(b, `"completed"`) {
		t.Fatalf("alice's task: %.600s", b)
	}
	gets := natstest.DirectGets(t, p.nc, streams.ResponsesStream)
	if b := c.task(testKey, "tasks/get", taskID); !strings.Contains(b, `"completed"`) {
		t.Fatalf("tasks/get: %.600s", b)
	}
	get := gets.Subjects(t)
	b := c.task(testKey, "tasks/resubscribe", taskID)
	if !strings.Contains(b, `"final":true`) {
		t.Fatalf("tasks/resubscribe: %.600s", b)
	}
	if resub := gets.Subjects(t); len(get) == 0 || len(resub) != len(get) {
		t.Errorf("tasks/resubscribe: %d direct gets on %s, want %d (tasks/get's, one reading of the frames): %v, tasks/get %v",
			len(resub), streams.ResponsesStream, len(get), resub, get)
	}
}

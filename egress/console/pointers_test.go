package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestIndexPointersOfDuplicateRecord: an indexer stored a batch's records
// and stopped (ctx cancelled by a rolling restart, or killed) before their
// pointers were stored; the batch was not acknowledged, so it is delivered
// again (AckWait 30 s, well inside the 2 min duplicate window). The record
// is then a duplicate and indexRequests publishes no pointer: the request
// is listed for its user but a search by its task, session or context
// never finds it.
func TestIndexPointersOfDuplicateRecord(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	ctx := context.Background()
	js := natstest.JetStream(t, p.nc)
	s, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seq := info.State.LastSeq + 1 // the sequence the request will get
	const id, user, task = "bulk-0000", "alice", "task-redelivered"
	// What the first attempt stored before it stopped: the record, with
	// the Nats-Msg-Id indexRequests gives it, and no pointer.
	rec, _ := json.Marshal(map[string]any{"request_id": id, "time": time.Now().UTC(), "pool": "idle",
		"principal": user, "task_id": task, "seq": seq})
	if _, err := js.Publish(ctx, subjects.KV(console.Bucket, "q."+bucketOf(user)), rec,
		jetstream.WithMsgID(fmt.Sprintf("ix.%d", seq))); err != nil {
		t.Fatal(err)
	}
	ids := publishRequests(t, p.nc, "idle", 1, func(int) string {
		return fmt.Sprintf(`{"request_id":%q,"user_id":%q,"task_id":%q,"params":{}}`, "bulk-0000", user, task)
	})
	waitIndexed(t, p, ids...) // the record stored by the "first attempt" is listed
	testkit.Eventually(t, 10*time.Second, "a search by task finding the request", func() bool {
		return slices.Contains(entryIDs(t, p.con, console.Query{TaskID: task}), id)
	})
}

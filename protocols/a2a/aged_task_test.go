package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestTaskWithAgedOutTurns: a task's turns age out of E2A_RESPONSES
// oldest first while their envelopes stay in E2A_REQUESTS. tasks/get (and
// a cancel, which walks the turns back) failed whole with frames_expired
// once the newest turn's first frames were gone and its final frame still
// stored. The task is rebuilt from what remains, marked
// MetaHistoryExpired: the turn whose frames all aged out is left out, the
// newest is rebuilt from its frames left; a cancel finds it ended.
func TestTaskWithAgedOutTurns(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	svc, err := egress.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := []string{"aged-task-turn-1", "aged-task-turn-2"}
	for i, id := range ids {
		natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: "1.0", RequestID: id, UserID: "alice",
			Params: map[string]any{"text": "question " + id}})
		var stored uint64
		for seq, end := int64(0), int64(i+2); seq <= end; seq++ {
			stored = natstest.PublishBurst(t, nc, id, seq, stored, natstest.Frame(id, seq, seq == end))
		}
	}
	// The agent acknowledges a request once its final frame is stored.
	cc, err := streams.AgentConsumerConfig("demo", 4)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, streams.RequestsStream, cc)
	if err != nil {
		t.Fatal(err)
	}
	for range ids {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	task := &host.Task{Session: host.Session{ID: "aged-task", Principal: "alice", RequestIDs: ids}, ContextID: "ctx-aged"}
	ans := NewAnswers(svc)
	whole, err := ans.A2ATaskOf(ctx, task, nil)
	if err != nil || whole.Metadata[MetaHistoryExpired] != nil {
		t.Fatalf("tasks/get with every frame stored: %v, metadata %v", err, whole.Metadata)
	}
	// A record that dropped its oldest turns (more than it keeps): the
	// task read from those it lists says it is not whole.
	dropped := *task
	dropped.Dropped = 3
	if d, err := ans.A2ATaskOf(ctx, &dropped, nil); err != nil || d.Metadata[MetaHistoryExpired] != true {
		t.Errorf("tasks/get of a record that dropped 3 turns: %v, metadata %v; want %s: true", err, d.Metadata, MetaHistoryExpired)
	}
	// Turn 1's frames and turn 2's first three age out; its final frame stays.
	natstest.PurgeBelowLast(t, js, streams.ResponsesStream)
	got, err := ans.A2ATaskOf(ctx, task, nil)
	if err != nil {
		t.Fatalf("tasks/get with its first frames aged out: %v, want the task from what remains", err)
	}
	b, _ := json.Marshal(got.History)
	if got.Status.State != whole.Status.State || got.Metadata[MetaHistoryExpired] != true ||
		strings.Contains(string(b), "question "+ids[0]) || !strings.Contains(string(b), "question "+ids[1]) {
		t.Errorf("aged task: state %s (want %s), metadata %v (want %s: true), history %s (want turn 2's alone)",
			got.Status.State, whole.Status.State, got.Metadata, MetaHistoryExpired, b)
	}
	_, err = ans.CancelTurns(ctx, task, func(context.Context, string) error {
		t.Error("a cancel was sent to a task whose turns have ended")
		return nil
	})
	if !errors.Is(err, egress.ErrNotCancelable) {
		t.Errorf("cancel of the aged task: %v, want ErrNotCancelable", err)
	}
}

package push_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestDeletedConsumersAreMadeAgain: the stage's two consumers deleted
// under it (an operator's `nats consumer rm`, a restored stream) are made
// again with the start-up configuration: a task update stored after the
// deletion is delivered, and the updates delivered before it are not
// delivered again (the new consumer starts at the oldest config, and the
// config's cursor is past them). Before, the consume stopped silently.
func TestDeletedConsumersAreMadeAgain(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL})
	a := e.turn("alice", "t1", "", "a", 2)
	e.handled("alice", "t1", r)
	before := len(r.all())

	ctx := tctx(t)
	wake := push.DefaultConsumer + "-wake"
	bucket := "KV_" + streams.PushBucket
	want := consumerConfig(ctx, t, e.js, streams.ResponsesStream, push.DefaultConsumer)
	wantWake := consumerConfig(ctx, t, e.js, bucket, wake)
	if err := e.js.DeleteConsumer(ctx, streams.ResponsesStream, push.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteConsumer(ctx, bucket, wake); err != nil {
		t.Fatal(err)
	}
	b := e.turn("alice", "t1", a, "b", 2)
	finalStored(t, e, b)
	testkit.Eventually(t, 20*time.Second, "turn b delivered", func() bool {
		return completedCount(t, push.V1, r.accepted()) == 2
	})
	got := consumerConfig(ctx, t, e.js, streams.ResponsesStream, push.DefaultConsumer)
	// Where a consumer starts is decided when it is made (the oldest
	// config's start): the rest is the start-up configuration.
	got.OptStartSeq, want.OptStartSeq = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("consumer %s made again with\n%+v\nwant\n%+v", push.DefaultConsumer, got, want)
	}
	if got := consumerConfig(ctx, t, e.js, bucket, wake); !reflect.DeepEqual(got, wantWake) {
		t.Errorf("consumer %s made again with\n%+v\nwant\n%+v", wake, got, wantWake)
	}
	// Turn a's updates (before the deletion) were not posted again.
	for _, d := range r.all()[before:] {
		if id, _, _ := splitID(d.eventID); id == a {
			t.Errorf("update %s of turn a delivered again after the consumer was made again", d.eventID)
		}
	}
}

// consumerConfig waits until durable name exists on stream and returns
// its configuration.
func consumerConfig(ctx context.Context, t *testing.T, js jetstream.JetStream, stream, name string) jetstream.ConsumerConfig {
	t.Helper()
	var c jetstream.Consumer
	testkit.Eventually(t, 20*time.Second, "consumer "+name+" on "+stream, func() bool {
		var err error
		c, err = js.Consumer(ctx, stream, name)
		return err == nil
	})
	return c.CachedInfo().Config
}

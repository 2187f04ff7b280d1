package push_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// remakeResponses removes E2A_RESPONSES and makes it again with its
// configuration (an operator's `nats stream rm` and the streams applied
// again, or a cluster that lost it): its sequences start again at 1, and
// its consumers go with it.
func remakeResponses(t *testing.T, e *env) {
	t.Helper()
	ctx := tctx(t)
	st, err := e.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := e.js.DeleteStream(ctx, streams.ResponsesStream); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// padResponses stores n response messages of a request of no task with
// configs, so that the sequences of the messages stored next are high.
func padResponses(t *testing.T, e *env, n int) {
	t.Helper()
	storeRequest(t, e, "pad", "nobody", "pad")
	for i := range n {
		storeFrame(t, e, "pad", "nobody", "pad", int64(i), "pad"+strconv.Itoa(i), false)
	}
}

// TestRemadeStreamRestartsConfigs: configs and cursors name E2A_RESPONSES
// sequences, which start again at 1 once the stream is made again under
// a running stage (restored, or removed and applied again). Alice's
// cursor stood on her first turn's final message (sequence 23), bob's
// config was made after it (From 23): every update of the new stream up
// to sequence 23 was taken for handled, or stored before the config, and
// acked undelivered (alice's second turn and bob's first never came).
// The stored sequences now carry the stream's identity (its creation
// time): a position in another stream's sequences starts again.
func TestRemadeStreamRestartsConfigs(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	alice, bob := newReceiver(t, nil), newReceiver(t, nil)
	defer e.logOnFailure(t)
	padResponses(t, e, 20)
	e.create("alice", push.Config{TaskID: "ta", URL: alice.srv.URL})
	storeTurn(t, e, "ta-r1", "ta", "", "a1;")
	e.handled("alice", "ta", alice)
	e.create("bob", push.Config{TaskID: "tb", URL: bob.srv.URL})

	remakeResponses(t, e)
	testkit.Eventually(t, 30*time.Second, "the stage's consumer bound again", func() bool {
		_, err := e.js.Consumer(context.Background(), streams.ResponsesStream, push.DefaultConsumer)
		return err == nil
	})
	storeTurn(t, e, "ta-r2", "ta", "ta-r1", "a2;")
	storeRequestAfter(t, e, "tb-r1", "bob", "tb", "")
	storeFrame(t, e, "tb-r1", "bob", "tb", 0, "b1;", false)
	storeFrame(t, e, "tb-r1", "bob", "tb", 1, "", true)
	testkit.Eventually(t, 30*time.Second, "alice's second turn and bob's first completed", func() bool {
		return completedBy(t, alice)["ta-r2"] && completedBy(t, bob)["tb-r1"]
	})
	ordered(t, push.V1, alice.accepted(), []string{"ta-r1", "ta-r2"}, "a1;a2;")
	ordered(t, push.V1, bob.accepted(), []string{"tb-r1"}, "b1;")
}

// TestRemadeStreamNewConsumerStartsAtItsFirst: a consumer made for a
// stream made again while the stage was stopped started after the
// smallest From of the stored configs, or the stream's last sequence:
// the new stream's messages up to it (bob's turn, stored before the
// stage started again) were never read. A From of another stream counts
// as the stream's start.
func TestRemadeStreamNewConsumerStartsAtItsFirst(t *testing.T) {
	e := newEnvOn(t)
	bob := newReceiver(t, nil)
	defer e.logOnFailure(t)
	padResponses(t, e, 20)
	e.create("bob", push.Config{TaskID: "tb", URL: bob.srv.URL})
	remakeResponses(t, e)
	storeRequestAfter(t, e, "tb-r1", "bob", "tb", "")
	storeFrame(t, e, "tb-r1", "bob", "tb", 0, "b1;", false)
	storeFrame(t, e, "tb-r1", "bob", "tb", 1, "", true)
	e.startStage()
	e.handled("bob", "tb", bob)
	ordered(t, push.V1, bob.accepted(), []string{"tb-r1"}, "b1;")
}

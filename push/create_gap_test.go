package push_test

import (
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestCreateGapLastMessage: Store.Create read its start (From) before it
// wrote the config. The task's last message, stored in between, was acked
// by the stage with no config to deliver it to, while the config's From
// said it was the config's: only a later message of the task recovered
// it (a drain), and as the last one nothing did. The start is now read
// again once the config is written: a message stored during the create
// is the config's only when the stage saw the config.
func TestCreateGapLastMessage(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	r := newReceiver(t, nil)
	defer e.logOnFailure(t)
	storeRequestAfter(t, e, "tg-r1", "alice", "tg", "")
	storeFrame(t, e, "tg-r1", "alice", "tg", 0, "g0;", false)
	var gapSeq uint64
	push.SetCreateGap(e.store, func() {
		push.SetCreateGap(e.store, nil)
		storeFrame(t, e, "tg-r1", "alice", "tg", 1, "", true)
		subj, _ := subjects.Response("tg-r1")
		last, err := streams.LastBySubject(tctx(t), e.nc, streams.ResponsesStream, subj)
		if err != nil {
			t.Fatal(err)
		}
		gapSeq = last.Seq
		testkit.Eventually(t, 20*time.Second, "the stage acked the task's last message, no config stored yet", func() bool {
			return consumerIdle(t, e)
		})
	})
	c := e.create("alice", push.Config{TaskID: "tg", URL: r.srv.URL})
	if gapSeq == 0 {
		t.Fatal("premise: the create ran no gap")
	}
	if c.From < gapSeq {
		// The config's start says the last message is its: it must come.
		testkit.Eventually(t, 20*time.Second, "the update at "+c.String()+"'s start delivered", func() bool {
			return completedBy(t, r)["tg-r1"]
		})
	}
	storeTurn(t, e, "tg-r2", "tg", "tg-r1", "g2;")
	testkit.Eventually(t, 20*time.Second, "the task's next turn delivered and handled", func() bool {
		ds, err := e.store.Deliveries(tctx(t), "alice", "tg")
		return completedBy(t, r)["tg-r2"] && err == nil && len(ds) == 1 && strings.HasPrefix(ds[0].LastEvent, "tg-r2:1:")
	})
	for _, d := range r.accepted() {
		if !strings.HasPrefix(d.eventID, "tg-r2:") {
			t.Errorf("update %s of the turn before the config delivered", d.eventID)
		}
	}
}

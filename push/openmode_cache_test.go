package push_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestOpenModeReadsEachEnvelopeOnce: with authentication off the
// envelopes (and so the frames) carry no user_id; the stage still reads a
// request's envelope once, not once per response message (requestOf's
// cache serves frames naming no user for an entry of none), for every
// task, with configs or not.
func TestOpenModeReadsEachEnvelopeOnce(t *testing.T) {
	e := newEnv(t)
	st := e.startStage()
	gets := natstest.DirectGets(t, st.nc, streams.RequestsStream)
	drained := func() {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, "the stage handled every response message", func() bool {
			c, err := e.js.Consumer(context.Background(), streams.ResponsesStream, push.DefaultConsumer)
			if err != nil {
				return false
			}
			i, err := c.Info(context.Background())
			s, serr := e.js.Stream(context.Background(), streams.ResponsesStream)
			if err != nil || serr != nil {
				return false
			}
			si, _ := s.Info(context.Background())
			return si.State.Msgs > 1 && i.NumPending == 0 && i.NumAckPending == 0 && i.AckFloor.Stream == si.State.LastSeq
		})
	}
	run := func(user string) (msgs uint64, n int) {
		s, _ := e.js.Stream(context.Background(), streams.ResponsesStream)
		si, _ := s.Info(context.Background())
		before, b := si.State.Msgs, gets.Count(t)
		id := e.turnWith(user, "task-"+user+"x", "", "t", 40, map[string]any{"pad": 2000})
		subj, _ := subjects.Response(id)
		testkit.Eventually(t, 30*time.Second, "final frame", func() bool {
			m, err := streams.LastBySubject(context.Background(), e.nc, streams.ResponsesStream, subj)
			return err == nil && strings.Contains(string(m.Data), `"is_final":true`)
		})
		drained()
		si, _ = s.Info(context.Background())
		return si.State.Msgs - before, gets.Count(t) - b
	}
	am, an := run("alice")
	om, on := run("")
	t.Logf("alice: %d messages, %d envelope reads; open mode: %d messages, %d envelope reads", am, an, om, on)
	if on > an+1 {
		t.Errorf("open mode (no user_id): %d envelope reads for %d response messages of one request, with a user: %d", on, om, an)
	}
}

package a2av1

import (
	"context"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// followTurns is a subscription's events (evs: the task t, then its last
// request's events) followed, when they leave the task interrupted
// (input-required, auth-required: not a terminal state), by the events of
// the task's next turn once the client's answer starts it (the task
// record's next request: host.TaskStore.NextTurn), and so on: the stream
// ends when the task reaches a terminal state (A2A v1.0 §3.1.6), or with
// the call.
func (h *handler) followTurns(ctx context.Context, c host.BindingCaller, t *host.Task, interaction bool,
	evs iter.Seq2[a2a.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		last := ""
		if n := len(t.RequestIDs); n > 0 {
			last = t.RequestIDs[n-1]
		}
		for {
			var state a2a.TaskState
			for ev, err := range evs {
				if !yield(ev, err) || err != nil {
					return
				}
				switch e := ev.(type) {
				case *a2a.Task:
					state = e.Status.State
				case *a2a.TaskStatusUpdateEvent:
					state = e.Status.State
				}
			}
			if !a2amap.Interrupted(state) || last == "" {
				return
			}
			next, err := c.NextTurn(ctx, t, last)
			if err != nil {
				if ctx.Err() == nil {
					yield(nil, sdkError(err))
				}
				return
			}
			last = next
			p := a2amap.Params{TaskID: t.ID, ContextID: t.ContextID, Resubscribe: true, Interaction: interaction}
			evs = h.h.V1Answers().A2AEvents(ctx, next, p, 0, egress.WithoutRequestCheck())
		}
	}
}

package a2av1

import (
	"context"

	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// follow is how a subscription to the task t goes on from a turn
// (a2aproto.Answers.A2AFollow): with the turn its record lists after it
// when that turn ends in a terminal state (host.TaskStore.LaterTurn), and
// after an interrupted turn (input-required, auth-required: not a
// terminal state) with the turn the client's answer starts, once it is
// recorded (host.TaskStore.NextTurn); the stream ends when the task
// reaches a terminal state (A2A v1.0 §3.1.6), or with the call.
func follow(c host.BindingCaller, t *host.Task) a2aproto.Follow {
	return a2aproto.Follow{
		Later: func(ctx context.Context, after string) (string, error) { return c.LaterTurn(ctx, t, after) },
		Next: func(ctx context.Context, after string) (string, error) {
			next, err := c.NextTurn(ctx, t, after)
			if err != nil {
				return "", sdkError(err)
			}
			return next, nil
		},
	}
}

package a2av1

import (
	"context"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Answers answers A2A v1.0 calls from their requests' frames with the A2A
// v1.0 events and values package protocols/a2a/a2amap builds, written as
// they are; protocols/a2a's Answers is one. A task's requests are its own
// only (host.Session.OwnRequests): those another principal stored under
// ids its record lists are neither read nor cancelled.
type Answers interface {
	// A2AResult is SendMessage's result: the agent's Message or the Task,
	// after the request's final frame.
	A2AResult(ctx context.Context, requestID string, p a2amap.Params, opts ...egress.ReplayOption) (a2a.SendMessageResult, error)
	// A2AEvents are SendStreamingMessage's events, up to the terminal
	// status.
	A2AEvents(ctx context.Context, requestID string, p a2amap.Params, from int64, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error]
	// A2AFollow are A2AEvents of a task's turn followed by those of its
	// later turns as f finds them.
	A2AFollow(ctx context.Context, requestID string, p a2amap.Params, from int64, f a2aproto.Follow, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error]
	// A2ASubscription are SubscribeToTask's events: the task rebuilt from
	// its requests, then its running request's events, and its later
	// turns' as f finds them.
	A2ASubscription(ctx context.Context, t *host.Task, interaction bool, f a2aproto.Follow, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error]
	// A2ATaskOf is the task rebuilt from its requests' frames.
	A2ATaskOf(ctx context.Context, t *host.Task, historyLength *int) (*a2a.Task, error)
	// A2ATaskNow is A2ATaskOf with the turn after the last one read
	// asked of later once the frames are read, when the task read is
	// terminal: a turn recorded meanwhile runs next (GetTask).
	A2ATaskNow(ctx context.Context, t *host.Task, historyLength *int, later func(ctx context.Context, after string) (string, error)) (*a2a.Task, error)
	// A2ATurnTask is the Task SendStreamingMessage's stream opens with:
	// the task t with the turn env, just submitted, as GetTask shows it.
	A2ATurnTask(ctx context.Context, t *host.Task, env *e2a.Envelope, historyLength *int) *a2a.Task
	TurnEnd(ctx context.Context, now, prev *host.Task, env *e2a.Envelope, requestID string) a2amap.TurnEnd
	// CancelTurns cancels a task's turns that have not ended, newest
	// first, awaiting their final frames (egress.ErrNotCancelable when all
	// have finished).
	CancelTurns(ctx context.Context, t *host.Task, cancel egress.CancelFunc) (bool, error)
	// Heartbeat is the interval of a stream's keep-alives.
	Heartbeat() time.Duration
}

var _ Answers = a2aproto.Answers{}

// Host is the pipeline as the A2A v1.0 package sees it: the host.Host
// (whose Gate admits HTTP calls: the Caller it returns is a
// host.BindingCaller), the gate of gRPC calls, the cancel of a request, and the
// answers from the frames.
type Host interface {
	host.Host
	host.HeaderGate
	host.Canceler
	// V1Answers answers the calls from their requests' frames.
	V1Answers() Answers
}

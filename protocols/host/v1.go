package host

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// The A2A v1.0 seam: package protocols/a2av1 implements a2a-go's request
// handler (a2asrv.RequestHandler), to which the SDK's transports (its
// JSON-RPC, HTTP+JSON and gRPC bindings) hand each call; the handler
// returns values and Go errors that the SDK writes in each binding's shape.
// So what its calls need of the caller returns errors instead of answering
// a [Reply], and the gate of a gRPC call reads headers (the call's
// metadata) instead of an HTTP request.

// Errors of a [BindingCaller] beyond [Submitter.Submit]'s, matched with
// errors.Is; the error's text is the pipeline's own.
var (
	// ErrInvalidPool: the agent pool asked for is not a valid name;
	// nothing was published.
	ErrInvalidPool = errors.New("host: invalid agent pool")
	// ErrTaskTerminal: the task's last request has finished (completed,
	// failed, canceled; not interrupted), so the task takes no new message (the conversation goes on in a new task of the
	// same context).
	ErrTaskTerminal = errors.New("host: task is in a terminal state")
)

// ListedTask is a task of a listing: its ownership record, and when the
// record was last updated (the task store's timestamp, whose text sorts in
// time order).
type ListedTask struct {
	Task
	Updated string
}

// TaskStore is [Tasks] with the listing and the turns of the caller's
// tasks.
type TaskStore interface {
	Tasks
	// ListTasks returns, in no order, the tasks the caller may read that
	// keep accepts, reading at most max records and the newest max
	// requests (a one-turn task has no record: its request stands for it;
	// the store is scanned, it has no secondary index).
	ListTasks(ctx context.Context, max int, keep func(*ListedTask) bool) ([]*ListedTask, error)
	// NextTurn waits until the task t's record holds a request after the
	// request after (the next turn) and returns it; the context's error
	// when it ends first.
	NextTurn(ctx context.Context, t *Task, after string) (requestID string, err error)
}

// BindingCaller is the principal a [Bindings] transport admitted (over
// HTTP or gRPC: A2A v1.0's), as the request handler's calls see it, its
// errors returned rather than answered.
type BindingCaller interface {
	// HeaderInput is the normalizer's view of a call with headers header
	// (HTTP headers or gRPC metadata, credentials removed) for the agent
	// pool agent ("" for the routing rule's).
	HeaderInput(header http.Header, agent string) normalizer.Input
	// Submitter submits a request on behalf of the caller; an invalid
	// pool name matches [ErrInvalidPool].
	Submitter
	// AcquireStream takes one of the caller's concurrent stream slots;
	// ok=false when none is free.
	AcquireStream() (release func(), ok bool)
	TaskStore
}

// HeaderGate admits the calls of an SDK's bindings: one that carries
// headers but no HTTP request (a gRPC call, its metadata read as headers),
// and an HTTP call, each as a BindingCaller.
type HeaderGate interface {
	// AdmitHeader authenticates header, strips its credential headers and
	// charges the caller's rate limit, the call counted in the requests
	// metric under protocol and route. A refusal is returned with its
	// Code: "unauthenticated" or "forbidden" (credentials),
	// "rate_limit_exceeded" or "unavailable" (rate limit); a context that
	// ended while the call waited is returned as err. Nothing of the call
	// has been read.
	AdmitHeader(ctx context.Context, header http.Header, protocol, route string) (c BindingCaller, f *Refusal, err error)
	// AdmitBinding is [Gate.Admit] for an SDK binding's HTTP call: the
	// caller admitted is a BindingCaller (its task store with it), so a
	// binding never meets a caller it cannot serve.
	AdmitBinding(w http.ResponseWriter, r *http.Request, protocol string, refuse Refuse) (c BindingCaller, ok bool)
}

// Bindings are the transports an SDK implements over a protocol package's
// request handler ([BindingServer]; A2A v1.0's), each call admitted by the host's gate before the SDK
// reads anything of it. The host serves JSONRPC (POST) and REST (the
// HTTP+JSON binding: every path under it) at the protocol's path, and
// registers GRPC's service on its gRPC server, built with
// GRPCServerOptions (what the service needs of the server: A2A v1.0's
// codec).
type Bindings struct {
	JSONRPC, REST     http.Handler
	GRPC              func(grpc.ServiceRegistrar)
	GRPCServerOptions []grpc.ServerOption
}

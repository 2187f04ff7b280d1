package a2a

import (
	"context"
	"errors"
	"net/http"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// AgentVaultError maps an error of egress to an AgentVault JSON-RPC
// error: unknown (or its history aged out: ErrHistoryAgedOut) → -32001, already final → -32004, bad request → -32602,
// anything else → -32000.
func AgentVaultError(err error) *jsonrpc.Error {
	_, code := egress.Classify(err)
	d := egress.ErrorData{Code: code}
	switch {
	case errors.Is(err, ErrHistoryAgedOut):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVTaskNotFound, Message: "Task Not Found: " + egress.ClientMessage(err),
			Data: egress.ErrorData{Code: egress.CodeFramesExpired}}
	case errors.Is(err, egress.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVTaskNotFound, Message: "Task Not Found", Data: d}
	case errors.Is(err, egress.ErrNotCancelable):
		return &jsonrpc.Error{Code: jsonrpc.CodeAVInvalidState, Message: "Invalid State: task already final", Data: d}
	case errors.Is(err, egress.ErrBadRequest):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: egress.ClientMessage(err), Data: d}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeAVServerError, Message: egress.ClientMessage(err), Data: d}
}

// admitAgentVaultModes applies the input modes of pool to an AgentVault
// message (tasks/send, tasks/sendSubscribe with a message) before anything
// is published, as admitProfile does to A2A v0.3's: a file part of a media
// type the pool does not accept is -32005 naming the pool and its modes
// (the profile leaves -320xx codes past -32004 to the server), as
// message/send of it gets on the same endpoint. It was published and
// reached the agent. The pool's other capabilities (streaming, required
// extensions) are A2A's: the profile declares neither. It answered rep
// when it returns false; protocol other than AgentVault's passes.
func (d *frontDoor) admitAgentVaultModes(rep host.Reply, in host.Call, protocol, pool string, env *e2a.Envelope) bool {
	if protocol != normalizer.ProtocolAgentVault || env == nil {
		return true
	}
	var modes []string
	if pr, ok := d.h.(Profiles); ok {
		_, _, modes = pr.PoolCapabilities(in.Ctx, pool)
	}
	if err := normalizer.CheckInputModes(env, pool, modes); err != nil {
		rep.Error(&jsonrpc.Error{Code: normalizer.JSONRPCCode(err), Message: egress.ClientMessage(err)})
		return false
	}
	return true
}

// avNotification is the reply to an AgentVault notification (a call
// without an id): its errors and refusals are dropped, because the
// profile's server "MUST NOT reply" to a notification
// (a2a-agentvault-profile.md, JSON-RPC 2.0 Structure), where the endpoint
// answers a failing A2A one with its error (host.RPCEndpoint.NotifyErrors:
// A2A defines no notifications). The exchange then ends with no content.
type avNotification struct{ host.Reply }

// Error drops the error of a notification.
func (avNotification) Error(*jsonrpc.Error) {}

// Refuse drops the refusal of a notification.
func (avNotification) Refuse(host.Refusal) {}

// serveAgentVault writes tasks/sendSubscribe's SSE answer (and an
// AgentVault task's resubscription) for requestID with serve: the frames
// from the resume point (Last-Event-ID or ?from=), an unknown request
// answered with an error event; then, when the turn ends the task while
// later (nil: never) finds a turn recorded after it, that turn's
// (ServeFollowed: the ended turn's status written SUBMITTED, never a final
// state a later turn takes back).
func serveAgentVault(serve ServeFunc, w http.ResponseWriter, r *http.Request, requestID string, p AgentVaultParams, later LaterFunc) {
	ServeFollowed(serve, AgentVaultFormat, w, r, requestID, later, func(o *render.Output, t FollowedTurn) (render.Renderer, func() (string, bool)) {
		s := newAgentVaultStream(o, t.ID, p)
		s.continued = t.Opened
		s.later = later.After(r.Context(), t.ID)
		return s, func() (string, bool) { return s.nextTurn, s.done }
	})
}

// agentVaultTaskOf answers AgentVault tasks/get: the task t rebuilt from
// its own requests (host.Session.OwnRequests) in the profile's Task shape,
// or egress.ErrNotFound.
func agentVaultTaskOf(ctx context.Context, ans Answers, t *host.Task) (AVTask, error) {
	reqs, err := ans.load(ctx, t)
	if err != nil {
		return AVTask{}, err
	}
	created := ""
	if reqs[0].Envelope != nil {
		created = reqs[0].Envelope.Timestamp
	}
	return AgentVaultTask(a2amap.V03Task(a2amap.BuildTask(t.ID, "", reqs, nil)), created), nil
}

// AgentVaultCancelResult is the result of AgentVault tasks/cancel.
type AgentVaultCancelResult struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// agentVaultCancel answers AgentVault tasks/cancel of the task t: the
// result once the cancel is sent, egress.ErrNotCancelable when the task is
// already final, egress.ErrNotFound when it has no request of its own.
func agentVaultCancel(ctx context.Context, ans Answers, t *host.Task, cancel egress.CancelFunc) (AgentVaultCancelResult, error) {
	if len(t.RequestIDs) == 0 {
		return AgentVaultCancelResult{}, egress.ErrNotFound
	}
	canceled, err := ans.CancelTurns(ctx, t, cancel)
	if err != nil {
		return AgentVaultCancelResult{}, err
	}
	msg := "Cancellation request received."
	if canceled {
		msg = "Task canceled."
	}
	return AgentVaultCancelResult{Success: true, Message: msg}, nil
}

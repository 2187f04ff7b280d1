package ingress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// rpcShape writes a refusal as a JSON-RPC error object (id null) with the
// failure's HTTP status.
func rpcShape(w http.ResponseWriter, f failure) { host.RefuseJSONRPC(w, nil, f) }

// readRPCBody reads the body with the size limit, answering 413 with a
// JSON-RPC error when it is too large.
func (s *Server) readRPCBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.maxBody)
	if n := r.ContentLength; n >= 0 && n <= s.opts.maxBody {
		// A declared length within the limit: read into a buffer of that
		// size (the server's body reader ends there). A body ending short
		// is a read error, as on the general path.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			rpcShape(w, failure{Status: http.StatusBadRequest, RPCCode: jsonrpc.CodeParseError, Message: "Parse error: could not read the body"})
			return nil, false
		}
		return b, true
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			rpcShape(w, failure{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest,
				Message: "Invalid Request: body exceeds " + strconv.FormatInt(s.opts.maxBody, 10) + " bytes"})
			return nil, false
		}
		rpcShape(w, failure{Status: http.StatusBadRequest, RPCCode: jsonrpc.CodeParseError, Message: "Parse error: could not read the body"})
		return nil, false
	}
	return buf.Bytes(), true
}

// publishRPC publishes env for p and answers JSON-RPC errors itself on
// failure.
func (s *Server) publishRPC(rep host.Reply, in host.Call, p Principal, pool string, env *e2a.Envelope) (Accepted, bool) {
	start := time.Now()
	acc, err := s.publish(in.Ctx, p, pool, env)
	s.metrics.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		s.rpcPublishError(rep, err)
		return acc, false
	}
	if acc.Warning != "" {
		rep.Header().Set(HeaderWarning, acc.Warning)
	}
	return acc, true
}

// rpcPublishError answers an error of publish or claimContext on a
// JSON-RPC endpoint.
func (s *Server) rpcPublishError(rep host.Reply, err error) {
	switch {
	case errors.Is(err, context.Canceled):
		// The caller went away (or, on stdio, cancelled the call, which
		// answers -32800 itself): nothing to answer.
	case errors.Is(err, ErrInvalidPool), errors.Is(err, ErrUnknownPool):
		rep.Error(jsonrpc.InvalidParams(err.Error()))
	case errors.Is(err, ErrTooLarge):
		// Never publishable as it is: 413, as readRPCBody, with the id.
		rep.Refuse(failure{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest, Message: "Invalid Request: " + err.Error(),
			Data: map[string]any{"code": "body_too_large", "retryable": false}})
	case errors.Is(err, ErrTaskTerminal):
		rep.Error(&Error{Code: jsonrpc.CodeA2AUnsupportedOperation, Message: "This operation is not supported: " + strings.TrimPrefix(err.Error(), "ingress: ")})
	case errors.Is(err, ErrConflict):
		// The id is taken by another principal: a conflict that says
		// nothing of the other's request.
		rep.Error(&Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: the id (Idempotency-Key or contextId) is already in use; choose another",
			Data: map[string]any{"conflict": true, "retryable": false}})
	default:
		rep.Header().Set("Retry-After", "1")
		rep.Refuse(failure{Status: http.StatusServiceUnavailable, RPCCode: jsonrpc.CodeInternalError,
			Message: "the pipeline could not accept the request; retry later", Data: map[string]any{"retryable": true}})
	}
}

// cancel publishes a cancel on the request's control subject.
func (s *Server) cancel(ctx context.Context, requestID string) error {
	_, err := agent.Cancel(ctx, s.js, requestID)
	return err
}

// The task seam (host.Tasks) of the calls of protocols/a2a: the caller's
// tasks and contexts under the ownership rule.

var _ host.TaskCaller = rpcCaller{}

// Task is the owned task record (ownedRecord).
func (c rpcCaller) Task(ctx context.Context, id string, a tenant.Access) (*host.Task, error) {
	rec, err := c.s.ownedRecord(ctx, c.p, KindTask, id, a)
	if err != nil {
		return nil, err
	}
	return &host.Task{Session: host.Session{ID: rec.ID, Protocol: rec.Protocol, Pool: rec.Pool, RequestIDs: rec.RequestIDs},
		ContextID: rec.ContextID}, nil
}

// TaskOpen is taskOpen, its error answered as publish's.
func (c rpcCaller) TaskOpen(rep host.Reply, in host.Call, t *host.Task) bool {
	if err := c.s.taskOpen(in.Ctx, &TaskRecord{ID: t.ID, RequestIDs: t.RequestIDs}); err != nil {
		c.s.rpcPublishError(rep, err)
		return false
	}
	return true
}

// ClaimContext is claimContext, its error answered as publish's.
func (c rpcCaller) ClaimContext(rep host.Reply, in host.Call, contextID string) bool {
	if err := c.s.claimContext(in.Ctx, c.p, contextID); err != nil {
		c.s.rpcPublishError(rep, err)
		return false
	}
	return true
}

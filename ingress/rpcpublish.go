package ingress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/e2a-pipeline/pipeline/agent"
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
	if f := c.s.recordReading.Load(); f != nil {
		(*f)(id)
	}
	rec, err := c.s.ownedRecord(ctx, c.p, KindTask, id, a)
	if err != nil {
		return nil, err
	}
	if f := c.s.recordRead.Load(); f != nil {
		(*f)(id, rec.RequestIDs)
	}
	return &host.Task{Session: c.p.session(rec), ContextID: rec.ContextID}, nil
}

// CheckTaskOpen is taskOpen, its errors matching the host's sentinels too.
func (c rpcCaller) CheckTaskOpen(ctx context.Context, t *host.Task) error {
	return hostError(c.s.taskOpen(ctx, &TaskRecord{ID: t.ID, RequestIDs: t.RequestIDs}))
}

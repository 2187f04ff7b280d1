package ingress

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The A2A v1.0 interfaces (see a2av1Handler): JSON-RPC at A2AV1Path, the
// HTTP+JSON binding under it (A2AV1Path + "/message:send", "/tasks/{id}"…).
const (
	A2AV1Path = "/a2a/v1"
	// A2AV1ListMax bounds the tasks ListTasks reads per call: the task
	// index is a key-value bucket, listed by scanning the caller's keys.
	A2AV1ListMax = 10_000
)

// a2av1Handler answers A2A v1.0 (SendMessage, SendStreamingMessage,
// GetTask, ListTasks, CancelTask, SubscribeToTask, the push-config methods
// and GetExtendedAgentCard) for the SDK's transports (a2asrv's JSON-RPC and
// HTTP+JSON handlers, thin adapters over this one handler). A request is
// normalized by the v0.3 A2A adapter (the SDK converts the v1.0 message to
// v0.3 losslessly) and answered from its durable frames by egress, whose
// events the SDK converts back: one mapping, two generations.
type a2av1Handler struct {
	s *Server
}

var _ a2asrv.RequestHandler = (*a2av1Handler)(nil)

// a2av1Call is what a transport adapter (HTTP, gRPC) knows of a call: its
// headers (HTTP headers, gRPC metadata; they feed the normalizer), the
// agent pool asked for, the A2A-Version asked for, and the authenticated
// principal.
type a2av1Call struct {
	header  http.Header
	agent   string
	version string
	channel string
	p       Principal
}

type a2av1Key struct{}

func a2av1From(ctx context.Context) (a2av1Call, bool) {
	c, ok := ctx.Value(a2av1Key{}).(a2av1Call)
	return c, ok
}

// a2av1Handlers returns the v1.0 JSON-RPC and HTTP+JSON handlers: both
// authenticate and rate-limit with the gate (refusals in each binding's
// error shape) before the SDK's transport decodes anything.
func (s *Server) a2av1Handlers() (rpcHandler, restHandler http.Handler) {
	h := &a2av1Handler{s: s}
	opts := []a2asrv.TransportOption{a2asrv.WithTransportKeepAlive(s.egress.Heartbeat())}
	rpc := a2asrv.NewJSONRPCHandler(h, opts...)
	rs := http.StripPrefix(A2AV1Path, a2asrv.NewRESTHandler(h, opts...))
	wrap := func(protocol string, shape errorShape, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w}
			defer func() { s.metrics.requests.WithLabelValues(protocol, "v1", strconv.Itoa(rec.code)).Inc() }()
			refuse := shape
			if refuse == nil {
				refuse = rpcShape
			}
			p, ok := s.gate(rec, r, "a2a", refuse)
			if !ok {
				return
			}
			r.Body = http.MaxBytesReader(rec, r.Body, s.opts.maxBody)
			if shape == nil {
				// JSON-RPC: a v0.3 method name gets a -32601 that says where
				// v0.3 is served (the SDK would answer a bare "method not
				// found").
				body, err := io.ReadAll(r.Body)
				if err != nil {
					rpcShape(rec, failure{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest,
						Message: "Invalid Request: body exceeds " + strconv.FormatInt(s.opts.maxBody, 10) + " bytes"})
					return
				}
				if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
					// The SDK's transport reads one call; A2A defines no
					// batches. -32600 says so (the SDK would answer -32602
					// with a Go type error).
					_ = jsonrpc.WriteError(rec, nil, jsonrpc.InvalidRequest("batches are not supported on the A2A v1.0 interface; send each call alone"))
					return
				}
				var head struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if json.Unmarshal(body, &head) == nil && strings.Contains(head.Method, "/") {
					_ = jsonrpc.WriteError(rec, head.ID, &Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found: " +
						jsonrpc.QuoteForMessage(head.Method) + ": a method of A2A v0.3, served at /a2a (this endpoint speaks A2A v1.0)"})
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			ctx := context.WithValue(r.Context(), a2av1Key{}, a2av1Call{header: r.Header, agent: r.URL.Query().Get("agent"),
				version: requestedVersion(r), channel: "http", p: p})
			next.ServeHTTP(rec, r.WithContext(ctx))
		})
	}
	// JSON-RPC refusals are rpcShape's (nil selects it, and the method
	// check); REST ones the binding's own.
	return wrap("a2a", nil, rpc), wrap("a2a", a2av1RESTShape, rs)
}

// a2av1RESTShape writes a gate refusal in the HTTP+JSON binding's error
// shape ({"error":{"code","status","message"}}, google.rpc.Status).
func a2av1RESTShape(w http.ResponseWriter, f failure) {
	status := map[int]string{http.StatusUnauthorized: "UNAUTHENTICATED", http.StatusForbidden: "PERMISSION_DENIED",
		http.StatusTooManyRequests: "RESOURCE_EXHAUSTED", http.StatusServiceUnavailable: "UNAVAILABLE"}[f.Status]
	if status == "" {
		status = "INVALID_ARGUMENT"
	}
	writeJSON(w, f.Status, map[string]any{"error": map[string]any{"code": f.Status, "status": status, "message": f.Message}})
}

func (h *a2av1Handler) call(ctx context.Context) (a2av1Call, error) {
	c, ok := a2av1From(ctx)
	if !ok {
		return c, fmt.Errorf("%w: no caller", a2a.ErrInternalError)
	}
	if v := c.version; v != "" && v != "1" && v != "1.0" && !strings.HasPrefix(v, "1.0.") {
		return c, fmt.Errorf("%w: A2A-Version %q: this interface serves A2A 1.0 (0.3 is served at /a2a)", a2a.ErrVersionNotSupported, v)
	}
	return c, nil
}

// requestedVersion is the A2A-Version the client asked for: the header, or
// the request parameter of that name. An absent one is taken as 1.0 here
// (the spec assumes 0.3 when it is absent; this interface serves 1.0 only,
// and curl users rarely send it).
func requestedVersion(r *http.Request) string {
	if v := strings.TrimSpace(r.Header.Get(a2a.SvcParamVersion)); v != "" {
		return v
	}
	return strings.TrimSpace(r.URL.Query().Get(a2a.SvcParamVersion))
}

// v1Error maps the pipeline's errors onto the SDK's, whose transports
// write each binding's code (JSON-RPC -32001…, HTTP 404…).
func v1Error(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, egress.ErrNotFound), errors.Is(err, ErrTaskNotFound):
		return a2a.ErrTaskNotFound
	case errors.Is(err, egress.ErrNotCancelable):
		return a2a.ErrTaskNotCancelable
	case errors.Is(err, ErrInvalidPool), errors.Is(err, ErrUnknownPool), errors.Is(err, ErrConflict):
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%w: %v", a2a.ErrInvalidRequest, err)
	case errors.Is(err, ErrTaskTerminal):
		return fmt.Errorf("%w: %s", a2a.ErrUnsupportedOperation, strings.TrimPrefix(err.Error(), "ingress: "))
	case errors.Is(err, context.Canceled):
		return err
	}
	switch normalizer.JSONRPCCode(err) {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams:
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	case jsonrpc.CodeMethodNotFound, jsonrpc.CodeA2AUnsupportedOperation:
		return fmt.Errorf("%w: %v", a2a.ErrUnsupportedOperation, err)
	}
	return fmt.Errorf("%w: the pipeline could not answer; retry later", a2a.ErrServerError)
}

// normalizeV1Send reads a v1.0 SendMessage request (method: the v0.3
// method it stands for, message/send or message/stream) into an envelope
// with the v0.3 A2A adapter, the SDK converting the message losslessly.
// Errors are the SDK's kinds (ErrInvalidParams…), which its transports
// answer in each binding's shape (FuzzNormalizeV1Send).
func normalizeV1Send(norm *normalizer.Normalizer, in normalizer.Input, req *a2a.SendMessageRequest, method string) (*normalizer.Result, error) {
	if req == nil || req.Message == nil {
		return nil, fmt.Errorf("%w: message is required", a2a.ErrInvalidParams)
	}
	params, err := json.Marshal(a2av0.FromV1SendMessageRequest(req))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	in.RPC = &normalizer.RPCRequest{ID: json.RawMessage(`1`), Method: method, Params: params}
	res, err := norm.FromA2A(in)
	if err != nil {
		return nil, v1Error(err)
	}
	return res, nil
}

// submit normalizes and publishes a SendMessage request, as message/send
// or message/stream of v0.3, and records it on its task.
func (h *a2av1Handler) submit(ctx context.Context, req *a2a.SendMessageRequest, method string) (acc Accepted, p egress.A2AParams, err error) {
	c, err := h.call(ctx)
	if err != nil {
		return acc, p, err
	}
	s := h.s
	in := s.inputFrom(c.header, nil, c.p, c.agent)
	in.Channel = c.channel
	res, err := normalizeV1Send(s.opts.norm, in, req, method)
	if err != nil {
		return acc, p, err
	}
	env := res.Envelope
	if env.TaskID != "" && a2aproto.Continued(env) {
		rec, err := s.ownedRecord(ctx, c.p, KindTask, env.TaskID, tenant.Write)
		if err != nil {
			return acc, p, a2a.ErrTaskNotFound
		}
		if err := s.taskOpen(ctx, rec); err != nil {
			return acc, p, v1Error(err)
		}
		if env.ContextID == "" {
			env.ContextID = rec.ContextID
		}
	} else if env.ContextID != "" {
		if err := s.claimContext(ctx, c.p, env.ContextID); err != nil {
			return acc, p, v1Error(err)
		}
	}
	submitted := time.Now()
	acc, err = s.publish(ctx, c.p, res.Pool, env)
	if err != nil {
		return acc, p, v1Error(err)
	}
	if env.TaskID != "" {
		record := s.opts.tasks.Append
		if !a2aproto.Continued(env) {
			record = s.opts.tasks.AppendNew // the adapter made the id up: one write, no read
		}
		if _, err := record(ctx, KindTask, TaskRecord{ID: env.TaskID, ContextID: env.ContextID,
			Protocol: normalizer.ProtocolA2A, Pool: res.Pool, Principal: c.p.UserID}, acc.RequestID, c.p.Tenant()); err != nil {
			s.opts.log.Warn("task index update failed", "task_id", env.TaskID, "request_id", acc.RequestID, "err", err)
		}
	}
	p = egress.A2AParams{TaskID: env.TaskID, ContextID: env.ContextID, Submitted: submitted,
		AcceptedOutputModes: env.ExpectedOutputModes, Interaction: a2aproto.Interaction(c.header, env)}
	if req.Config != nil {
		p.HistoryLength = req.Config.HistoryLength
	}
	return acc, p, nil
}

// SendMessage publishes the message and answers, after the final frame,
// the agent's Message or the Task; with returnImmediately, the Task as
// submitted at once (GetTask and SubscribeToTask follow it).
func (h *a2av1Handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	acc, p, err := h.submit(ctx, req, normalizer.A2AMessageSend)
	if err != nil {
		return nil, err
	}
	if req.Config != nil && req.Config.ReturnImmediately {
		ts := p.Submitted.UTC()
		id := cmp.Or(p.TaskID, acc.RequestID)
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: cmp.Or(p.ContextID, id),
			Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts}}, nil
	}
	res, err := h.s.egress.A2AResult(ctx, acc.RequestID, p, egress.WithoutRequestCheck())
	if err != nil {
		return nil, v1Error(err)
	}
	return v1Result(res)
}

func v1Result(res legacy.SendMessageResult) (a2a.SendMessageResult, error) {
	switch v := res.(type) {
	case *legacy.Message:
		return a2av0.ToV1Message(v)
	case *legacy.Task:
		return a2av0.ToV1Task(v)
	}
	return nil, fmt.Errorf("%w: result %T", a2a.ErrInternalError, res)
}

// SendStreamingMessage publishes the message and streams its events from
// the durable frames: the task submitted, its artifacts, then its final
// status (the stream ends on the terminal state).
func (h *a2av1Handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	acc, p, err := h.submit(ctx, req, normalizer.A2AMessageStream)
	if err != nil {
		return errSeq(err)
	}
	release, ok := h.stream(ctx)
	if !ok {
		return errSeq(fmt.Errorf("%w: too many open streams", a2a.ErrServerError))
	}
	return v1Events(h.s.egress.A2AEvents(ctx, acc.RequestID, p, 0, egress.WithoutRequestCheck()), release)
}

// stream takes one of the principal's stream slots.
func (h *a2av1Handler) stream(ctx context.Context) (func(), bool) {
	c, _ := a2av1From(ctx)
	release, f := h.s.streamSlot(c.p)
	return release, f == nil
}

func errSeq(err error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
}

// v1Events converts egress's events to v1.0 ones (no final flag: the
// stream ends after the terminal status).
func v1Events(evs iter.Seq2[legacy.Event, error], release func()) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		defer release()
		for ev, err := range evs {
			if err != nil {
				yield(nil, v1Error(err))
				return
			}
			v, err := egress.A2AV1Event(ev)
			if err != nil {
				yield(nil, fmt.Errorf("%w: %v", a2a.ErrInternalError, err))
				return
			}
			if !yield(v, nil) {
				return
			}
		}
	}
}

// GetTask answers the caller's task rebuilt from its requests' frames.
func (h *a2av1Handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	c, err := h.call(ctx)
	if err != nil {
		return nil, err
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, fmt.Errorf("%w: historyLength must not be negative", a2a.ErrInvalidParams)
	}
	rec, err := h.s.ownedRecord(ctx, c.p, KindTask, string(req.ID), tenant.Read)
	if err != nil {
		return nil, a2a.ErrTaskNotFound
	}
	return h.task(ctx, rec, req.HistoryLength)
}

func (h *a2av1Handler) task(ctx context.Context, rec *TaskRecord, historyLength *int) (*a2a.Task, error) {
	t, err := h.s.egress.A2ATask(ctx, rec.ID, rec.ContextID, rec.RequestIDs, historyLength)
	if err != nil {
		return nil, v1Error(err)
	}
	return a2av0.ToV1Task(t)
}

// ListTasks lists the caller's tasks (every task for an audit or admin
// principal), newest update first, filtered by context and state, in
// pages of pageSize (default 50, at most 100) joined by an opaque cursor.
func (h *a2av1Handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	c, err := h.call(ctx)
	if err != nil {
		return nil, err
	}
	size := cmp.Or(req.PageSize, 50)
	if size < 1 || size > 100 {
		return nil, fmt.Errorf("%w: pageSize must be 1 to 100", a2a.ErrInvalidParams)
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, fmt.Errorf("%w: historyLength must not be negative", a2a.ErrInvalidParams)
	}
	if req.Status != "" && !slices.Contains(v1States, req.Status) {
		return nil, fmt.Errorf("%w: status %q is not a task state", a2a.ErrInvalidParams, req.Status)
	}
	after, err := decodeCursor(req.PageToken)
	if err != nil {
		return nil, fmt.Errorf("%w: pageToken: %v", a2a.ErrInvalidParams, err)
	}
	recs, err := h.s.opts.tasks.list(ctx, KindTask, A2AV1ListMax, func(r *TaskRecord) bool {
		return r.Protocol == normalizer.ProtocolA2A && c.p.Tenant().Allows(tenant.Read, r.Principal) &&
			(req.ContextID == "" || r.ContextID == req.ContextID)
	})
	if err != nil {
		return nil, v1Error(err)
	}
	// Newest update first; ties by id, so the cursor is a total order.
	slices.SortFunc(recs, func(a, b *TaskRecord) int {
		return cmp.Or(cmp.Compare(b.Updated, a.Updated), cmp.Compare(a.ID, b.ID))
	})
	filtered := req.Status != "" || req.StatusTimestampAfter != nil
	var (
		tasks   []*a2a.Task
		total   int
		last    *TaskRecord
		hasMore bool
	)
	for _, r := range recs {
		var t *a2a.Task
		if filtered {
			if t, err = h.task(ctx, r, req.HistoryLength); err != nil {
				continue // its requests aged out of the streams
			}
			if req.Status != "" && t.Status.State != req.Status {
				continue
			}
			if req.StatusTimestampAfter != nil && (t.Status.Timestamp == nil || !t.Status.Timestamp.After(*req.StatusTimestampAfter)) {
				continue
			}
		}
		total++
		if after != nil && cmp.Or(cmp.Compare(after.Updated, r.Updated), cmp.Compare(r.ID, after.ID)) <= 0 {
			continue // on an earlier page
		}
		if len(tasks) == size {
			hasMore = true
			continue
		}
		if t == nil {
			if t, err = h.task(ctx, r, req.HistoryLength); err != nil {
				total--
				continue
			}
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		tasks, last = append(tasks, t), r
	}
	next := ""
	if hasMore {
		next = encodeCursor(last)
	}
	if tasks == nil {
		tasks = []*a2a.Task{}
	}
	return &a2a.ListTasksResponse{Tasks: tasks, TotalSize: total, PageSize: len(tasks), NextPageToken: next}, nil
}

var v1States = []a2a.TaskState{a2a.TaskStateAuthRequired, a2a.TaskStateCanceled, a2a.TaskStateCompleted, a2a.TaskStateFailed,
	a2a.TaskStateInputRequired, a2a.TaskStateRejected, a2a.TaskStateSubmitted, a2a.TaskStateWorking}

type cursor = TaskRecord

func encodeCursor(r *TaskRecord) string {
	return base64.RawURLEncoding.EncodeToString([]byte(r.Updated + "\n" + r.ID))
}

func decodeCursor(tok string) (*cursor, error) {
	if tok == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, errors.New("not a token of this server")
	}
	updated, id, ok := strings.Cut(string(b), "\n")
	if !ok {
		return nil, errors.New("not a token of this server")
	}
	return &cursor{Updated: updated, ID: id}, nil
}

// CancelTask cancels the task's running request and answers the task once
// the worker stopped; a finished task is not cancelable.
func (h *a2av1Handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	c, err := h.call(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := h.s.ownedRecord(ctx, c.p, KindTask, string(req.ID), tenant.Write)
	if err != nil || len(rec.RequestIDs) == 0 {
		return nil, a2a.ErrTaskNotFound
	}
	if _, err := h.s.egress.CancelRequest(ctx, rec.LastRequest(), h.s.cancel); err != nil {
		return nil, v1Error(err)
	}
	return h.task(ctx, rec, nil)
}

// SubscribeToTask answers the task rebuilt from the durable streams first
// (a finished task too: a2a-go's own server refuses those), then its
// running request's events live to the terminal state.
func (h *a2av1Handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	c, err := h.call(ctx)
	if err != nil {
		return errSeq(err)
	}
	rec, err := h.s.ownedRecord(ctx, c.p, KindTask, string(req.ID), tenant.Read)
	if err != nil {
		return errSeq(a2a.ErrTaskNotFound)
	}
	release, ok := h.stream(ctx)
	if !ok {
		return errSeq(fmt.Errorf("%w: too many open streams", a2a.ErrServerError))
	}
	return v1Events(h.s.egress.A2ASubscription(ctx, rec.ID, rec.ContextID, rec.RequestIDs, a2aproto.Interaction(c.header, &e2a.Envelope{})), release)
}

// The pipeline sends no push notifications (the card says so).

func (h *a2av1Handler) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2av1Handler) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2av1Handler) CreateTaskPushConfig(context.Context, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2av1Handler) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return a2a.ErrPushNotificationNotSupported
}

// GetExtendedAgentCard: the card declares no extended card.
func (h *a2av1Handler) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}

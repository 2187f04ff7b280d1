package a2av1

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/ctxkey"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// handler answers A2A v1.0 (SendMessage, SendStreamingMessage, GetTask,
// ListTasks, CancelTask, SubscribeToTask, the push-config methods and
// GetExtendedAgentCard) for the SDK's transports (a2asrv's JSON-RPC and
// HTTP+JSON handlers, a2agrpc's service: thin adapters over this one
// handler). A request is normalized by the v0.3 A2A adapter (the SDK
// converts the v1.0 message to v0.3 losslessly) and answered from its
// durable frames by egress with the A2A v1.0 events and values
// protocols/a2a/a2amap builds: one mapping, no conversion of the answer.
type handler struct {
	h Host
}

var _ a2asrv.RequestHandler = (*handler)(nil)

// call is what a binding (HTTP, gRPC) knows of a call: its headers (HTTP
// headers, gRPC metadata; they feed the normalizer), the agent pool asked
// for, the A2A-Version asked for, the envelope's channel, and the caller
// the host's gate admitted.
type call struct {
	header  http.Header
	agent   string
	version string
	channel string
	c       host.BindingCaller
	// query is an HTTP call's URL query: HTTP+JSON's
	// ListTaskPushNotificationConfigs reads pageSize and pageToken there
	// (the SDK's REST handler does not).
	query url.Values
	// refusal, when set, is what the JSON-RPC binding's streamRPC was
	// refused before its stream opened, handed back to the SDK for its
	// answer: SendStreamingMessage yields it.
	refusal error
	// r is an HTTP call's request (nil for gRPC): the extended card's
	// base URL.
	r *http.Request
	// body is an HTTP+JSON POST's body, read again when the SDK could not
	// decode it (specStatusWriter.finish).
	body []byte
	// invalid, for a gRPC call, holds what its proto request was refused
	// for when the SDK decoded it (checkProto), which the SDK's
	// conversion would lose; the handler answers it.
	invalid *error
	// slotHeld: the binding took the call's stream slot before the SDK's
	// transport opened the stream (holdSlot), and gives it back when the
	// call ends; the handler takes none.
	slotHeld bool
	// tooMany, when set, is set by the handler to the refusal it refuses
	// the call with for want of a stream slot (host.TooManyStreams) or
	// because the task has as many turns waiting as the pipeline allows
	// (host.TooManyTurns), which the SDK's transports would answer as an
	// internal error: the gRPC binding answers RESOURCE_EXHAUSTED, the
	// HTTP bindings a SendMessage's 429 (bindings.send). Its zero value
	// (no Status): not refused.
	tooMany *host.Refusal
	// protoTenant, for a gRPC call, is the tenant of its CancelTask or
	// SubscribeToTask request, which the SDK's conversion drops.
	protoTenant *string
	// nextPageToken, for a gRPC call, is where ListTaskPushConfigs leaves
	// its next page's token, which the SDK's conversion drops; the gRPC
	// binding puts it back in the response.
	nextPageToken *string
}

var callKey = ctxkey.New[call]("a2av1 call")

func withCall(ctx context.Context, c call) context.Context { return callKey.With(ctx, c) }

func callFrom(ctx context.Context) (call, bool) { return callKey.From(ctx) }

// call returns the call of ctx, checking the A2A-Version asked for and,
// over gRPC, the proto request (call.invalid).
func (h *handler) call(ctx context.Context) (call, error) {
	c, ok := callFrom(ctx)
	if !ok {
		return c, fmt.Errorf("%w: no caller", a2a.ErrInternalError)
	}
	if v := c.version; v != "" && v != "1" && v != "1.0" && !strings.HasPrefix(v, "1.0.") {
		return c, fmt.Errorf("%w: A2A-Version %q: this interface serves A2A 1.0 (0.3 is served at /a2a)", a2a.ErrVersionNotSupported, v)
	}
	if c.invalid != nil && *c.invalid != nil {
		return c, *c.invalid
	}
	return c, nil
}

// normalizeSend reads a v1.0 SendMessage request (method: the v0.3 method
// it stands for, message/send or message/stream) into an envelope with the
// v0.3 A2A adapter, the SDK converting the message losslessly. Errors are
// the SDK's kinds (ErrInvalidParams…), which its transports answer in each
// binding's shape (FuzzNormalizeV1Send).
func normalizeSend(norm *normalizer.Normalizer, in normalizer.Input, req *a2a.SendMessageRequest, method string) (*normalizer.Result, error) {
	if req == nil || req.Message == nil {
		return nil, fmt.Errorf("%w: message is required", a2a.ErrInvalidParams)
	}
	// A null part decodes to a nil *Part, which the SDK's conversion
	// dereferences: a panic that dropped the client's connection.
	if i := slices.Index(req.Message.Parts, nil); i >= 0 {
		return nil, fmt.Errorf("%w: message.parts[%d] is null", a2a.ErrInvalidParams, i)
	}
	if r := req.Message.Role; r != a2a.MessageRoleUser && r != a2a.MessageRoleAgent {
		// Named as v1.0 names them (a2a.proto's enum Role): the v0.3
		// adapter's own check said "user" or "agent", which this
		// interface refuses.
		return nil, errRole
	}
	params, err := json.Marshal(a2av0.FromV1SendMessageRequest(req))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	in.RPC = &normalizer.RPCRequest{ID: json.RawMessage(`1`), Method: method, Params: params}
	res, err := norm.FromA2A(in)
	if err != nil {
		return nil, sdkError(err)
	}
	res.Envelope.Provenance.Details[normalizer.DetailA2AVersion] = normalizer.A2AVersion1
	keepPartFields(res.Envelope.Params, req.Message.Parts)
	return res, nil
}

// errRole refuses a v1.0 message without a role, or with one that is not
// A2A v1.0's (a v0.3 "user", ROLE_UNSPECIFIED).
var errRole = fmt.Errorf("%w: message.role must be ROLE_USER or ROLE_AGENT", a2a.ErrInvalidParams)

// errTaskIDRequired refuses GetTask, CancelTask and SubscribeToTask
// without the task's id, a REQUIRED field of their requests (a2a.proto):
// a validation error (A2A v1.0 §3.3.2), InvalidParams on every binding as
// the gRPC binding's conversion answers it, not TaskNotFoundError.
var errTaskIDRequired = fmt.Errorf("%w: id (the task's) is required", a2a.ErrInvalidParams)

// submit normalizes and submits a SendMessage request, as message/send
// or message/stream of v0.3, recorded on its task; stream: its events are
// streamed in this call (a stream slot, the frames subscribed to before
// the publish). Call Done on the result when the answer ends.
func (h *handler) submit(ctx context.Context, req *a2a.SendMessageRequest, method string, stream bool) (sub *host.Submitted, p a2amap.Params, err error) {
	c, err := h.callFor(ctx, sendTenant(req))
	if err != nil {
		return nil, p, err
	}
	in := c.c.HeaderInput(c.header, c.agent)
	in.Channel = c.channel
	res, err := normalizeSend(h.h.Normalizer(), in, req, method)
	if err != nil {
		return nil, p, err
	}
	env := res.Envelope
	continued := a2aproto.Continued(env)
	var prev *host.Task // the continued task's record, before this turn
	if env.TaskID != "" && continued {
		t, err := c.c.Task(ctx, env.TaskID, tenant.Write)
		if err != nil {
			return nil, p, a2a.ErrTaskNotFound
		}
		prev = t
		// The retry of a turn t holds is the duplicate, answered as the
		// first call was, even once the task has ended since.
		if !a2aproto.Retried(t, env) {
			if err := c.c.CheckTaskOpen(ctx, t); err != nil {
				return nil, p, sdkError(err)
			}
		}
		if err := a2aproto.CheckTaskContext(env.ContextID, false, t.ContextID); err != nil {
			return nil, p, asSDK(a2a.ErrInvalidParams, err)
		}
		if env.ContextID == "" {
			env.ContextID = t.ContextID
		}
		if c.agent == "" && t.Pool != "" {
			// The task's pool holds it: a message on the pipeline's own
			// interface continuing it goes there, not to the default pool.
			res.Pool = t.Pool
		}
	}
	if err := h.checkProfile(ctx, c, res.Pool, method == normalizer.A2AMessageStream, env); err != nil {
		return nil, p, err
	}
	// A stream, and a blocking SendMessage, whose answer waits for the
	// final frame, take one of the caller's stream slots; a send with
	// returnImmediately, answered at once, takes none.
	slot := stream || req.Config == nil || !req.Config.ReturnImmediately
	s := host.Submission{Pool: res.Pool, Envelope: env, ClaimContext: a2aproto.ClaimsContext(env, continued, prev), Slot: slot, Prepare: stream,
		Before: func(ctx context.Context) (func(context.Context) error, error) {
			return h.inlinePush(ctx, in, req, env, prev)
		}}
	if env.TaskID != "" {
		// A turn of the task: recorded first, run after the task's earlier
		// turn. Not continued: the adapter made the id up (one write, no
		// read).
		s.Turn = &host.Turn{Task: host.Task{Session: host.Session{ID: env.TaskID, Protocol: normalizer.ProtocolA2A, Pool: res.Pool},
			ContextID: env.ContextID}, Created: !continued}
	}
	submitted := time.Now()
	sub, err = c.c.Submit(ctx, s)
	if errors.Is(err, host.ErrTooManyStreams) {
		c.refusedSlot()
		return nil, p, errTooManyStreams
	} else if errors.Is(err, host.ErrTooManyTurns) {
		c.refused(host.TooManyTurns)
		return nil, p, errTooManyTurns
	} else if err != nil {
		return nil, p, sdkError(err)
	}
	return sub, h.answerParams(ctx, c, req, env, prev, sub, stream, submitted), nil
}

// answerParams are the mapping parameters of the answer to the message
// env submitted as sub at submitted (prev: the task it continues, nil for
// a new one).
func (h *handler) answerParams(ctx context.Context, c call, req *a2a.SendMessageRequest, env *e2a.Envelope, prev *host.Task,
	sub *host.Submitted, stream bool, submitted time.Time) a2amap.Params {
	p := a2amap.Params{TaskID: env.TaskID, ContextID: env.ContextID, Submitted: submitted,
		AcceptedOutputModes: env.ExpectedOutputModes, Interaction: a2aproto.Interaction(c.header, env)}
	if req.Config != nil {
		p.HistoryLength = req.Config.HistoryLength
	}
	if !stream && prev != nil {
		// The answer to a message continuing the task is the Task, from
		// its earlier turns (a2amap.Params.Continued): at once with
		// returnImmediately, else read when the turn has ended (a turn
		// accepted meanwhile changes it: a2amap.Params.TurnEnded).
		p.Continued = true
		if req.Config != nil && req.Config.ReturnImmediately {
			p.Task = h.h.V1Answers().A2ATurnTask(ctx, prev, env, nil)
		}
	}
	if !stream && prev == nil {
		// A new task's Task answer holds its user message, as GetTask
		// shows it (its history was the agent's replies only), the one
		// of returnImmediately too (it was a bare Task).
		id := cmp.Or(env.TaskID, sub.RequestID)
		p.Task = a2amap.BuildTask(id, cmp.Or(env.ContextID, id), []a2amap.Request{{Envelope: env}}, nil)
	}
	if !stream && env.TaskID != "" && (req.Config == nil || !req.Config.ReturnImmediately) {
		// A blocking answer that is a Task reads the task when the turn
		// has ended (a2amap.Params.TurnEnded): a turn accepted meanwhile,
		// a continued task's earlier turns.
		p.TurnEnded = a2aproto.TurnEnded(ctx, c.c, prev, env, sub.RequestID, h.h.V1Answers().TurnEnd)
	}
	if stream {
		// The Task the stream opens with: a new task's, or the continued
		// one with its earlier turns (whose stream stays the task's: the
		// agent's direct answer ends it as a status-update,
		// a2amap.Mapper.Replied).
		p.Continued = prev != nil
		id := cmp.Or(env.TaskID, sub.RequestID)
		if prev == nil {
			prev = &host.Task{Session: host.Session{ID: id}, ContextID: cmp.Or(env.ContextID, id)}
		}
		p.Task = h.h.V1Answers().A2ATurnTask(ctx, prev, env, p.HistoryLength)
	}
	return p
}

// SendMessage publishes the message and answers, after the final frame,
// the agent's Message or the Task; with returnImmediately, the Task as
// submitted at once (GetTask and SubscribeToTask follow it).
func (h *handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	sub, p, err := h.submit(ctx, req, normalizer.A2AMessageSend, false)
	if err != nil {
		return nil, err
	}
	defer sub.Done()
	acc := sub.Accepted
	if req.Config != nil && req.Config.ReturnImmediately {
		ts := p.Submitted.UTC()
		if p.Task != nil {
			// The task as GetTask shows it now: a continued one's earlier
			// turns, then this message (A2ATurnTask); a new one's message.
			t := *p.Task
			if p.Continued {
				if n := p.HistoryLength; n != nil && *n >= 0 && len(t.History) > *n {
					t.History = t.History[len(t.History)-*n:]
				}
			} else {
				t.Status = a2a.TaskStatus{State: a2a.TaskStateSubmitted}
				if n := p.HistoryLength; n != nil && *n == 0 {
					t.History = nil
				}
			}
			if t.Status.Timestamp == nil {
				t.Status.Timestamp = &ts
			}
			return &t, nil
		}
		id := cmp.Or(p.TaskID, acc.RequestID)
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: cmp.Or(p.ContextID, id),
			Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts}}, nil
	}
	res, err := h.h.V1Answers().A2AResult(ctx, acc.RequestID, p, egress.WithoutRequestCheck(), egress.CountedAs(SendFormat))
	if err != nil {
		return nil, sdkError(err)
	}
	// The client's parts only (output modes, interaction spec), as v0.3's
	// message/send: a reply of dropped parts only is answered with the task.
	keep := a2aproto.EventFilter(p)
	kept, ok := keep(res)
	if !ok {
		id := cmp.Or(p.TaskID, acc.RequestID)
		t, err := h.h.V1Answers().A2ATaskOf(ctx, &host.Task{Session: host.Session{ID: id, RequestIDs: []string{acc.RequestID}},
			ContextID: cmp.Or(p.ContextID, id)}, p.HistoryLength)
		if err != nil {
			return nil, sdkError(err)
		}
		kept, _ = keep(t)
	}
	if r, ok := kept.(a2a.SendMessageResult); ok {
		return r, nil
	}
	return nil, fmt.Errorf("%w: result %T", a2a.ErrInternalError, kept)
}

// SendStreamingMessage publishes the message and streams its events from
// the durable frames: the Task, submitted (A2A v1.0 §3.1.2: a task's
// stream begins with it), its artifacts, then its final status (the
// stream ends on the terminal state); a direct answer is the Message
// alone.
func (h *handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	if c, ok := callFrom(ctx); ok && c.refusal != nil {
		// A binding's stream refused before it opened: the refusal, written
		// by the SDK.
		return errSeq(c.refusal)
	}
	// A stream slot, and the frames subscribed to before the publish: a
	// new request's stream opens without reading E2A_RESPONSES.
	sub, p, err := h.submit(ctx, req, normalizer.A2AMessageStream, true)
	if err != nil {
		return errSeq(err)
	}
	// The task's stream: a later turn accepted while this one runs
	// follows it (a2aproto.Answers.A2AFollow).
	c, _ := callFrom(ctx)
	f := follow(c.c, &host.Task{Session: host.Session{ID: cmp.Or(p.TaskID, sub.RequestID)}})
	f.Next = nil // an interrupted turn's stream ends at the question, unless its answer is recorded already (f.Later)
	return v1Events(h.h.V1Answers().A2AFollow(sub.Context(), sub.RequestID, p, 0, f, egress.WithoutRequestCheck(), egress.CountedAs(streamFormat(ctx))), p, sub.Done)
}

// streamFormat is the label a stream the SDK writes is counted under: the
// gRPC binding's, else the SSE of the HTTP bindings.
func streamFormat(ctx context.Context) string {
	if _, ok := grpc.Method(ctx); ok {
		return GRPCStreamFormat
	}
	return StreamFormat
}

// stream takes one of the caller's stream slots (none when the binding
// holds it: call.slotHeld).
func (h *handler) stream(ctx context.Context) (func(), bool) {
	c, _ := callFrom(ctx)
	if c.slotHeld {
		return func() {}, true
	}
	release, ok := c.c.AcquireStream()
	if !ok {
		c.refusedSlot()
	}
	return release, ok
}

// refusedSlot notes that the call was refused for want of a stream slot
// (call.tooMany).
func (c call) refusedSlot() { c.refused(host.TooManyStreams) }

// refused notes that the call was refused with f (call.tooMany).
func (c call) refused(f host.Refusal) {
	if c.tooMany != nil {
		*c.tooMany = f
	}
}

// errTooManyStreams refuses a stream when the caller's slots are taken.
var errTooManyStreams = fmt.Errorf("%w: too many open streams", a2a.ErrServerError)

// errTooManyTurns refuses a message to a task that has as many turns
// waiting as the pipeline allows (host.ErrTooManyTurns).
var errTooManyTurns = fmt.Errorf("%w: too many turns of this task waiting", a2a.ErrServerError)

// tooManyRefusal is the refusal a SendMessage's err stands for, answered
// before a stream opens as every door answers it: host.TooManyStreams
// (errTooManyStreams) or host.TooManyTurns (errTooManyTurns).
func tooManyRefusal(err error) (host.Refusal, bool) {
	switch {
	case errors.Is(err, errTooManyStreams):
		return host.TooManyStreams, true
	case errors.Is(err, errTooManyTurns):
		return host.TooManyTurns, true
	}
	return host.Refusal{}, false
}

func errSeq(err error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
}

// v1Events are egress's events (the stream ends after the terminal
// status), without the parts the client of p must not get
// (a2aproto.EventFilter: its output modes, the interaction spec), errors
// in the SDK's kinds.
func v1Events(evs iter.Seq2[a2a.Event, error], p a2amap.Params, release func()) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		defer release()
		keep := a2aproto.EventFilter(p)
		for ev, err := range evs {
			if err != nil {
				yield(nil, sdkError(err))
				return
			}
			ev, ok := keep(ev)
			if !ok {
				continue
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// GetTask answers the caller's task rebuilt from its requests' frames.
func (h *handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	c, err := h.readCall(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, errTaskIDRequired
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, fmt.Errorf("%w: historyLength must not be negative", a2a.ErrInvalidParams)
	}
	t, err := c.c.Task(ctx, string(req.ID), tenant.Read)
	if err != nil {
		return nil, a2a.ErrTaskNotFound
	}
	// The record read again once the frames are: a turn recorded
	// meanwhile runs next (A2ATaskNow).
	v, err := h.h.V1Answers().A2ATaskNow(ctx, t, req.HistoryLength, follow(c.c, t).Later)
	if err != nil {
		return nil, sdkError(err)
	}
	return v, nil
}

func (h *handler) task(ctx context.Context, t *host.Task, historyLength *int) (*a2a.Task, error) {
	v, err := h.h.V1Answers().A2ATaskOf(ctx, t, historyLength)
	if err != nil {
		return nil, sdkError(err)
	}
	return v, nil
}

// ListTasks lists the caller's tasks (every task for an audit or admin
// principal: the host's ownership rule) of the call's pool when it names
// one (a pool's interface, a tenant, ?agent=: that agent's tasks), of
// every pool otherwise (the pipeline's own interface), filtered by context, state and
// status time (statusTimestampAfter: at or after, a2a.proto), sorted by
// their status timestamp, most recent first (A2A v1.0 §3.1.4; ties by
// id), in pages of pageSize (default 50, at most 100) joined by an opaque
// cursor of the last task's sort key. The status timestamp is the task's
// as GetTask answers it, from its frames, so every task listed is read
// (at most ListMax); a task without one yet (submitted, no frame) is
// sorted and filtered by the time its record was last written.
func (h *handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	c, err := h.readCall(ctx, req.Tenant)
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
	if req.Status == "TASK_STATE_UNSPECIFIED" {
		// The enum's zero value by name (an HTTP+JSON query carries it
		// so; the SDK reads it as unset elsewhere): no filter.
		req.Status = a2a.TaskStateUnspecified
	}
	if req.Status != "" && !slices.Contains(states, req.Status) {
		return nil, fmt.Errorf("%w: status %q is not a task state", a2a.ErrInvalidParams, req.Status)
	}
	after, err := decodeCursor(req.PageToken)
	if err != nil {
		return nil, fmt.Errorf("%w: pageToken: %v", a2a.ErrInvalidParams, err)
	}
	recs, err := c.c.ListTasks(ctx, ListMax, func(t *host.ListedTask) bool {
		return t.Protocol == normalizer.ProtocolA2A && (req.ContextID == "" || t.ContextID == req.ContextID) &&
			(c.agent == "" || t.Pool == c.agent) // a pool's interface lists that agent's tasks (pooltenant.go)
	})
	if err != nil {
		return nil, sdkError(err)
	}
	keys, byID, built := h.listing(ctx, req, recs, after)
	var (
		tasks   []*a2a.Task
		last    cursor
		hasMore bool
	)
	total := len(keys)
	for _, k := range keys {
		if after != nil && after.compare(k) >= 0 {
			continue // on an earlier page
		}
		if len(tasks) == size {
			hasMore = true
			break
		}
		t := built[k.id]
		if req.HistoryLength != nil {
			var err error
			if t, err = h.task(ctx, &byID[k.id].Task, req.HistoryLength); err != nil {
				total-- // aged out since it was read
				continue
			}
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		tasks, last = append(tasks, t), k
	}
	next := ""
	if hasMore {
		next = last.encode()
	}
	if tasks == nil {
		tasks = []*a2a.Task{}
	}
	// pageSize is the page size used (the proto: "The page size used for
	// this response"; the spec's examples answer the size asked for with
	// fewer tasks), not the number of tasks on the page.
	return &a2a.ListTasksResponse{Tasks: tasks, TotalSize: total, PageSize: size, NextPageToken: next}, nil
}

// listing reads the tasks listed as recs and returns those req's filters
// keep, sorted in the listing's order (cursor.go) with their keys, each
// task's record and the task as read. after is the page token's cursor
// (nil: the first page, which starts the listing now, or at the newest
// status timestamp when an agent's clock runs ahead of the pipeline's).
func (h *handler) listing(ctx context.Context, req *a2a.ListTasksRequest, recs []*host.ListedTask, after *cursor) (
	keys []cursor, byID map[string]*host.ListedTask, built map[string]*a2a.Task) {
	t0 := time.Now()
	if after != nil {
		t0 = after.t0
	}
	read := h.readTasks(ctx, recs)
	keys = make([]cursor, 0, len(recs))
	byID = make(map[string]*host.ListedTask, len(recs))
	built = make(map[string]*a2a.Task, len(recs))
	for i, r := range recs {
		t := read[i]
		if t == nil {
			continue // its requests aged out of the streams
		}
		at, ok := statusTime(t, r)
		if req.Status != "" && t.Status.State != req.Status ||
			req.StatusTimestampAfter != nil && (!ok || at.Before(*req.StatusTimestampAfter)) {
			continue
		}
		keys, byID[r.ID], built[r.ID] = append(keys, cursor{at: at, id: r.ID}), r, t
		if after == nil && at.After(t0) {
			t0 = at // an agent's clock ahead of the pipeline's
		}
	}
	for i := range keys {
		keys[i].t0 = t0
	}
	slices.SortFunc(keys, cursor.compare)
	return keys, byID, built
}

// listReaders bounds the tasks one ListTasks reads at once.
const listReaders = 8

// readTasks reads the tasks listed as recs, listReaders at a time: the
// task of recs[i] at [i], nil for one whose requests aged out of the
// streams (or that could not be read).
func (h *handler) readTasks(ctx context.Context, recs []*host.ListedTask) []*a2a.Task {
	out := make([]*a2a.Task, len(recs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, listReaders)
	for i, r := range recs {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if t, err := h.task(ctx, &r.Task, nil); err == nil {
				out[i] = t
			}
		})
	}
	wg.Wait()
	return out
}

// statusTime is the status timestamp of t, the task listed as r, or when
// it has none (no frame yet) the time r's record was written; false when
// neither is known.
func statusTime(t *a2a.Task, r *host.ListedTask) (time.Time, bool) {
	if t.Status.Timestamp != nil {
		return *t.Status.Timestamp, true
	}
	at, err := e2a.ParseTime(r.Updated)
	return at, err == nil
}

// states are the task states a ListTasks filter may name.
var states = []a2a.TaskState{a2a.TaskStateAuthRequired, a2a.TaskStateCanceled, a2a.TaskStateCompleted, a2a.TaskStateFailed,
	a2a.TaskStateInputRequired, a2a.TaskStateRejected, a2a.TaskStateSubmitted, a2a.TaskStateWorking}

// CancelTask cancels the task's running turns (egress.Service.CancelTurns),
// the task's record marked first so that it takes no later message
// (host.Tasks.CancelRunning), and answers the task once the workers
// stopped; a finished task is not cancelable.
func (h *handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	c, err := h.readCall(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, errTaskIDRequired
	}
	t, err := c.c.Task(ctx, string(req.ID), tenant.Write)
	if err != nil || len(t.RequestIDs) == 0 {
		return nil, a2a.ErrTaskNotFound
	}
	after, err := c.c.CancelRunning(ctx, t, func(ctx context.Context, t *host.Task) error {
		_, err := h.h.V1Answers().CancelTurns(ctx, t, h.h.Cancel)
		return err
	})
	if after != nil {
		t = after // read again: a turn appended meanwhile was cancelled too
	}
	if err != nil {
		// Nothing running: an interrupted task (input-required,
		// auth-required) is canceled by a cancel turn of its own.
		if !errors.Is(err, egress.ErrNotCancelable) {
			return nil, sdkError(err)
		}
		id, ierr := c.c.CancelInterrupted(ctx, t)
		if errors.Is(ierr, egress.ErrNotCancelable) {
			return nil, sdkError(err)
		}
		if ierr != nil {
			return nil, sdkError(ierr)
		}
		t.RequestIDs = append(slices.Clone(t.RequestIDs), id)
	}
	return h.task(ctx, t, nil)
}

// SubscribeToTask answers the task rebuilt from the durable streams first,
// then its running request's events live to the terminal state; a later
// turn and an interrupted task's answer are followed (follow). A task in a terminal state is
// UnsupportedOperationError (§3.1.6) unless the call activates
// ReplayExtension: then the task alone, and the stream ends.
func (h *handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	c, err := h.readCall(ctx, req.Tenant)
	if err != nil {
		return errSeq(err)
	}
	if req.ID == "" {
		return errSeq(errTaskIDRequired)
	}
	t, err := c.c.Task(ctx, string(req.ID), tenant.Read)
	if err != nil {
		return errSeq(a2a.ErrTaskNotFound)
	}
	if err := h.checkProfile(ctx, c, t.Pool, true, nil); err != nil {
		return errSeq(err)
	}
	release, ok := h.stream(ctx)
	if !ok {
		return errSeq(errTooManyStreams)
	}
	// The task and its live events without the parts a basic client
	// must not get (no output modes here: all of them otherwise).
	interaction := a2aproto.Interaction(c.header, &e2a.Envelope{})
	evs := h.h.V1Answers().A2ASubscription(ctx, t, interaction, follow(c.c, t), egress.CountedAs(streamFormat(ctx)))
	if !ReplayRequested(c.header) {
		evs = refuseFinished(evs)
	}
	return v1Events(evs, a2amap.Params{Interaction: interaction}, release)
}

// finishedError is SubscribeToTask's answer for a task in a terminal
// state (without ReplayExtension).
func finishedError(id a2a.TaskID, state a2a.TaskState) error {
	return fmt.Errorf("%w: task %s has finished (%s): SubscribeToTask follows a task that has not; "+
		"read it with GetTask, or activate the extension %s to have it replayed", a2a.ErrUnsupportedOperation, id, state, ReplayExtension)
}

// refuseFinished is a subscription's events, or UnsupportedOperationError
// when its first, the task, is in a terminal state (A2A v1.0 §3.1.6).
func refuseFinished(evs iter.Seq2[a2a.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		first := true
		for ev, err := range evs {
			if t, ok := ev.(*a2a.Task); ok && first && t.Status.State.Terminal() {
				// The state named as v0.3 names it, as this answer always has.
				yield(nil, finishedError(t.ID, a2a.TaskState(a2av0.FromV1TaskState(t.Status.State))))
				return
			}
			first = false
			if !yield(ev, err) {
				return
			}
		}
	}
}

// The push-config methods are in push.go.

// GetExtendedAgentCard answers the host's extended card for the caller
// (CardHost.ExtendedCard: the card of the pool called, with what the
// caller may use), in its v1.0 form.
func (h *handler) GetExtendedAgentCard(ctx context.Context, req *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	tenant := ""
	if req != nil {
		tenant = req.Tenant
	}
	// The pool the tenant names, as for every other method (a client
	// built from a pool's card sends it over gRPC): it was ignored, and
	// the root card answered.
	c, err := h.readCall(ctx, tenant)
	if err != nil {
		return nil, err
	}
	ch, ok := h.h.(CardHost)
	if !ok {
		return nil, CapabilityUnsupported("extendedAgentCard", "this agent declares no extended agent card")
	}
	m, err := ch.ExtendedCard(ctx, c.c, c.r, c.agent)
	if err != nil {
		return nil, extendedCardError(err)
	}
	card, err := V1Card(m)
	if err != nil {
		return nil, fmt.Errorf("%w: extended card: %v", a2a.ErrInternalError, err)
	}
	return card, nil
}

package a2a

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	a2av1 "github.com/a2aproject/a2a-go/v2/a2a"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// InteractionExtension is the URI of the trpc interaction-spec extension
// a client declares in the X-A2A-Extensions (v0.3) or A2A-Extensions
// (v1.0) header.
const InteractionExtension = "trpc-a2a-version"

// frontDoor answers A2A v0.3 and AgentVault calls over the host.
type frontDoor struct{ h host.TaskHost }

// serve answers one A2A or AgentVault JSON-RPC request.
func (d *frontDoor) serve(rep host.Reply, in host.Call, c host.RPCCaller, req *jsonrpc.Request) {
	tc, ok := c.(host.TaskCaller)
	if !ok || d.h == nil {
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the host keeps no tasks"})
		return
	}
	if sw := rep.Stream(); sw != nil && Streaming(req.Method) {
		_, t, _ := method(req.Method)
		rep = host.HTTPReply(&sseErrors{ResponseWriter: sw, agentVault: t == 1}, req.ID)
	}
	// The request is already decoded: the adapters read it as is, with no
	// second encode and parse.
	nin := c.Input(in, req)
	protocol, toRPC := normalizer.ProtocolA2A, Error
	if _, t, _ := method(req.Method); t == 1 {
		protocol, toRPC = normalizer.ProtocolAgentVault, AgentVaultError
	}
	if req.Method == normalizer.A2ATasksGet || req.Method == normalizer.A2ATasksCancel {
		// Shared names: the task's record says which protocol made it.
		// Only the caller's own tasks are looked at, so the answer's shape
		// says nothing about another principal's task.
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(req.Params, &id)
		if t, gerr := tc.Task(in.Ctx, id.ID, tenant.Read); gerr == nil && t.Protocol == normalizer.ProtocolAgentVault {
			protocol, toRPC = normalizer.ProtocolAgentVault, AgentVaultError
		}
	}
	if protocol == normalizer.ProtocolAgentVault && req.IsNotification() {
		rep = avNotification{rep}
	}
	if protocol == normalizer.ProtocolA2A {
		echoExtensions(rep, in, req.Method)
	}
	if protocol == normalizer.ProtocolA2A && d.serveDirect(rep, in, tc, nin, req) {
		return
	}
	adapt, _ := d.h.Normalizer().Adapter(protocol)
	res, err := adapt(nin)
	if err != nil {
		rep.Error(&jsonrpc.Error{Code: normalizer.JSONRPCCode(err), Message: egress.ClientMessage(err)})
		return
	}
	env := res.Envelope
	ans := NewAnswers(d.h.TaskFrames())
	// owned is the caller's task the call names, nil (not found answered)
	// when there is none.
	owned := func(a tenant.Access) *host.Task {
		t, err := tc.Task(in.Ctx, env.TaskID, a)
		if err != nil {
			taskNotFound(rep, protocol, env.TaskID)
			return nil
		}
		return t
	}
	switch res.Op {
	case normalizer.OpSubmit:
		d.submit(rep, in, tc, protocol, res, req)
	case normalizer.OpQuery:
		t := owned(tenant.Read)
		if t == nil {
			return
		}
		if protocol == normalizer.ProtocolAgentVault {
			answer(rep, toRPC)(agentVaultTaskOf(in.Ctx, ans, t))
			return
		}
		// The record read again once the frames are: a turn recorded
		// meanwhile runs next (A2ATaskNow).
		later := func(ctx context.Context, after string) (string, error) { return tc.LaterTurn(ctx, t, after) }
		answer(rep, toRPC)(v03Task(ans.A2ATaskNow(in.Ctx, t, HistoryLength(env), later)))
	case normalizer.OpCancel:
		t := owned(tenant.Write)
		if t == nil {
			return
		}
		if protocol == normalizer.ProtocolAgentVault {
			answer(rep, toRPC)(agentVaultCancelTask(in.Ctx, ans, tc, t, d.h.Cancel))
			return
		}
		answer(rep, toRPC)(a2aCancel(in.Ctx, ans, tc, t, d.h.Cancel))
	case normalizer.OpSubscribe:
		t := owned(tenant.Read)
		if t == nil || !d.admitProfile(rep, in, protocol, t.Pool, req.Method, nil) {
			return
		}
		d.resubscribe(rep, in, c, ans, t, protocol == normalizer.ProtocolAgentVault, toRPC, req, Interaction(in.Header, env))
	default:
		rep.Error(jsonrpc.MethodNotFound(req.Method))
	}
}

// resubscribe follows the caller's task t (tasks/resubscribe) from the
// oldest of its turns that has not ended to the newest's final frame, one
// turn after another (Answers.FollowedTurns, serveTurns), or, when the
// resume point names a turn of t (a resubscription's event id,
// turnResumePoint: every turn's, one's too), from that turn, after that frame, whether it has ended
// or not, through each later one (Answers.TurnsFrom); a resume point
// naming no turn of t's is dropped. AgentVault's tasks/sendSubscribe of a
// task (agentVault) follows its newest turn (Answers.LastTurn), from its
// first frame.
func (d *frontDoor) resubscribe(rep host.Reply, in host.Call, c host.RPCCaller, ans Answers, t *host.Task, agentVault bool,
	toRPC func(error) *jsonrpc.Error, req *jsonrpc.Request, interaction bool) {
	r := in.Request
	var turns []string
	var err error
	named := false // the resume point names turns[0]
	switch {
	case agentVault:
		var last string
		last, err = ans.LastTurn(in.Ctx, t)
		turns = []string{last}
	default:
		if turn, from, ok := turnResumePoint(r); ok {
			turns, err = ans.TurnsFrom(in.Ctx, t, turn)
			named = len(turns) > 0
			if !named {
				from = 0 // not a turn of t's (its own): no resume point
			}
			r = withResumePoint(r, from)
		}
		if err == nil && !named {
			turns, err = ans.FollowedTurns(in.Ctx, t)
		}
	}
	if err != nil {
		rep.Error(toRPC(err))
		return
	}
	last := ""
	if len(turns) > 0 {
		last = turns[len(turns)-1]
	}
	w := rep.Stream()
	if w == nil {
		return // a notification: nothing to follow
	}
	release, ok := c.StreamSlot(rep)
	if !ok {
		return
	}
	defer release()
	var later LaterFunc // a turn recorded since is followed too
	if tc, ok := c.(host.Tasks); ok {
		later = LaterTurns(tc, t.ID)
	}
	if agentVault {
		serveAgentVault(d.h.TaskFrames().ServeExisting, w, r, last, AgentVaultParams{JSONRPCID: req.ID, TaskID: t.ID}, later)
		return
	}
	// A task AgentVault made has no context of its own: its events name
	// the task's id (the mapper's fallback), the opening status too (it
	// was "").
	p := a2amap.Params{JSONRPCID: req.ID, TaskID: t.ID, ContextID: cmp.Or(t.ContextID, t.ID), Resubscribe: true, Interaction: interaction}
	if from, _ := egress.ResumePoint(r); from == 0 && len(turns) > 0 {
		// The opening working status at the first turn's stored time: the
		// replayed frames' events carry theirs (one read of its envelope).
		p.Submitted = ans.TurnTime(in.Ctx, turns[0])
	}
	serveTurns(d.h.TaskFrames().ServeExisting, w, r, turns, p, later)
}

// answer returns the function that answers a result, or its error mapped
// with toRPC.
func answer(rep host.Reply, toRPC func(error) *jsonrpc.Error) func(any, error) {
	return func(v any, err error) {
		if err != nil {
			rep.Error(toRPC(err))
			return
		}
		rep.Result(v)
	}
}

// taskNotFound answers an unknown task (or another principal's) in the
// protocol's words.
func taskNotFound(rep host.Reply, protocol string, taskID string) {
	if protocol == normalizer.ProtocolAgentVault {
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeAVTaskNotFound, Message: "Task not found: " + taskID})
		return
	}
	rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeA2ATaskNotFound, Message: "Task not found"})
}

// submit publishes a message/send, message/stream, tasks/send or
// tasks/sendSubscribe request, records it on its task, and answers it with
// the package's renderers over the host.
func (d *frontDoor) submit(rep host.Reply, in host.Call, tc host.TaskCaller, protocol string, res *normalizer.Result, req *jsonrpc.Request) {
	env := res.Envelope
	// prev is the continued task's record before this turn (nil for a
	// new task).
	prev, ok := d.admitSend(rep, in, tc, protocol, res, req.Method)
	if !ok {
		return
	}
	w := rep.Stream()
	// The frames are streamed in this call: subscribed to before the
	// publish, a new request's stream opens without reading E2A_RESPONSES
	// (egress.ExpectStream).
	prepare := w != nil && in.Request != nil && !req.IsNotification() && (req.Method == normalizer.A2AMessageStream ||
		(req.Method == normalizer.A2AMessageSend && blockingSend(env)))
	// A stream, and a blocking message/send, whose answer waits for the
	// final frame as an E2A ?wait=true does (alone, or as an element of a
	// batch, w nil: the batch waits for it), take one of the caller's
	// stream slots; a send answered at once, or a notification, none.
	slot := (w != nil && Streaming(req.Method)) ||
		(!req.IsNotification() && req.Method == normalizer.A2AMessageSend && blockingSend(env))
	s := host.Submission{Pool: res.Pool, Envelope: env, Slot: slot, Prepare: prepare,
		ClaimContext: ClaimsContext(env, Continued(env), prev)}
	s.Turn = submittedTurn(env, protocol, res.Pool, prev)
	if protocol == normalizer.ProtocolA2A {
		s.Before = func(context.Context) (func(context.Context) error, error) {
			undo, ok := d.inlinePush(rep, in, tc, req, env, prev)
			if !ok {
				return nil, errAnswered
			}
			return undo, nil
		}
	}
	if !admitResumePoint(rep, in, req, protocol) {
		return
	}
	submitted := time.Now()
	sub, err := tc.Submit(in.Ctx, s)
	if errors.Is(err, errAnswered) || !host.ReplySubmitted(rep, sub, err) {
		return
	}
	defer sub.Done()
	acc := sub.Accepted
	if prepare {
		in.Ctx, in.Request = sub.Context(), sub.Answering(in.Request)
	}
	if req.IsNotification() {
		return // published; nothing to answer
	}
	ans := NewAnswers(d.h.TaskFrames())
	params := a2amap.Params{JSONRPCID: req.ID, TaskID: env.TaskID, ContextID: env.ContextID, HistoryLength: HistoryLength(env),
		AcceptedOutputModes: env.ExpectedOutputModes, Interaction: Interaction(in.Header, env)}
	switch req.Method {
	case normalizer.A2AMessageStream:
		if w == nil {
			return
		}
		// A continued task's stream stays the task's (a2amap.Mapper.Replied).
		params.HistoryLength, params.Submitted, params.Continued = nil, submitted, prev != nil
		serveStream(d.h.Serve, w, in.Request, acc.RequestID, params, LaterTurns(tc, env.TaskID))
	case normalizer.A2AMessageSend:
		if !blockingSend(env) {
			rep.Result(a2amap.V03Task(nonBlockingTask(in.Ctx, ans, prev, env, submitted)))
			return
		}
		// The answer to a message continuing the task is the Task, from
		// its earlier turns (a2amap.Params.Continued); a Task answer is
		// read when the turn has ended (a turn accepted meanwhile changes
		// it: a2amap.Params.TurnEnded).
		params.Continued = prev != nil
		if prev == nil {
			// A new task's Task answer holds its user message, as
			// tasks/get shows it (its history was the agent's replies only).
			params.Task = a2amap.BuildTask(env.TaskID, env.ContextID, []a2amap.Request{{Envelope: env}}, nil)
		}
		if env.TaskID != "" {
			params.TurnEnded = TurnEnded(in.Ctx, tc, prev, env, acc.RequestID, ans.TurnEnd)
		}
		if w != nil {
			// One HTTP answer: rendered as the frames come, with blank
			// lines while the agent is idle; all of them, whatever resume
			// point the request names.
			d.h.ServeFrom(in.Request.Context(), w, acc.RequestID, SendFormat, 0, func(o *render.Output) render.Renderer {
				return NewSend(o, acc.RequestID, params)
			})
			return
		}
		answer(rep, Error)(v03Result(ans.A2AResult(in.Ctx, acc.RequestID, params, egress.WithoutRequestCheck(), egress.CountedAs(SendFormat))))
	case normalizer.AVTasksSendSubscribe:
		if w == nil {
			return
		}
		serveAgentVault(d.h.TaskFrames().ServeExisting, w, sub.Answering(in.Request), acc.RequestID, AgentVaultParams{JSONRPCID: req.ID, TaskID: env.TaskID},
			LaterTurns(tc, env.TaskID))
	default: // tasks/send
		rep.Result(map[string]string{"id": env.TaskID})
	}
}

// submittedTurn is the turn of its task a message with env submits to
// pool (nil for none: env names no task), prev the task's record before
// it (nil for a new task). It is recorded first, run after the task's
// earlier turn, and it is a turn of the task's protocol: AgentVault's
// tasks/send continuing an A2A task is checked as A2A's message is (a
// task whose cancel turn is recorded takes none), where it reopened a
// canceled task.
func submittedTurn(env *e2a.Envelope, protocol, pool string, prev *host.Task) *host.Turn {
	if env.TaskID == "" {
		return nil
	}
	tp := protocol
	if prev != nil && prev.Protocol != "" {
		tp = prev.Protocol
	}
	return &host.Turn{Task: host.Task{Session: host.Session{ID: env.TaskID, Protocol: tp, Pool: pool},
		ContextID: env.ContextID}, Created: !Continued(env)}
}

// admitResumePoint refuses a streaming call (message/stream,
// tasks/sendSubscribe with a message) whose resume point (Last-Event-ID,
// ?from=) is malformed, before anything is published, with the error its
// stream would end with, in protocol's words, as E2A's and A2E's doors
// refuse it: it was published and ran, and its stream answered the
// client's error. It answered rep when it returns false.
func admitResumePoint(rep host.Reply, in host.Call, req *jsonrpc.Request, protocol string) bool {
	if !Streaming(req.Method) || in.Request == nil || req.IsNotification() {
		return true
	}
	err := CheckResumePoint(in.Request)
	switch {
	case err == nil:
		return true
	case protocol == normalizer.ProtocolAgentVault:
		rep.Error(AgentVaultError(err))
	default:
		rep.Error(Error(err))
	}
	return false
}

// CheckResumePoint returns the error a stream of r would end with for its
// resume point (egress.ResumePoint's, wrapping egress.ErrBadRequest): nil
// for none, a frame sequence, or a turn's event id (turnResumePoint). The
// streaming calls that submit a message (A2A v0.3, AgentVault, v1.0's
// SendStreamingMessage) refuse a malformed one before the publish.
func CheckResumePoint(r *http.Request) error {
	if _, _, ok := turnResumePoint(r); ok {
		return nil
	}
	_, err := egress.ResumePoint(r)
	return err
}

// nonBlockingTask is the answer to a non-blocking message/send
// (configuration.blocking false): the task at once, as tasks/get shows it
// (its earlier turns, then this message, submitted or waiting behind a
// turn that runs); the client polls tasks/get or cancels it.
func nonBlockingTask(ctx context.Context, ans Answers, prev *host.Task, env *e2a.Envelope, submitted time.Time) *a2av1.Task {
	t := a2amap.BuildTask(env.TaskID, env.ContextID, []a2amap.Request{{Envelope: env}}, HistoryLength(env))
	if prev != nil {
		t = ans.A2ATurnTask(ctx, prev, env, HistoryLength(env))
	}
	if t.Status.Timestamp == nil {
		ts := submitted.UTC()
		t.Status.Timestamp = &ts
	}
	return t
}

// admitSend checks a message before anything is published: its task
// (admitTurn), then the profile of the pool it goes to (admitProfile: its
// streaming, required extensions and input modes):
// the pool that holds a continued task when the call names none (the
// pipeline's own endpoint), else res's. It returns the continued task's
// record (nil for a new task); it answered rep when ok is false.
func (d *frontDoor) admitSend(rep host.Reply, in host.Call, tc host.TaskCaller, protocol string, res *normalizer.Result, method string) (prev *host.Task, ok bool) {
	prev, ok = admitTurn(rep, in, tc, protocol, res.Envelope)
	if !ok {
		return nil, false
	}
	if prev != nil && prev.Pool != "" && in.Agent == "" {
		res.Pool = prev.Pool
	}
	return prev, d.admitProfile(rep, in, protocol, res.Pool, method, res.Envelope) &&
		d.admitAgentVaultModes(rep, in, protocol, res.Pool, res.Envelope)
}

// admitTurn checks env's task against the caller before anything is
// published: a continued task must be the caller's and open (it then
// keeps its context when the message names none). It returns the
// continued task's record (nil for a new task); it answered rep when ok is
// false.
func admitTurn(rep host.Reply, in host.Call, tc host.TaskCaller, protocol string, env *e2a.Envelope) (prev *host.Task, ok bool) {
	if env.TaskID != "" && Continued(env) {
		t, err := tc.Task(in.Ctx, env.TaskID, tenant.Write)
		if err != nil {
			taskNotFound(rep, protocol, env.TaskID)
			return nil, false
		}
		// A finished A2A task accepts no more messages (v0.3 §7.1), also
		// when AgentVault's tasks/send names it (whose own tasks continue
		// whatever their state): it reopened a completed A2A task. The
		// retry of a turn it holds is answered as the duplicate it is
		// (Retried).
		if (protocol == normalizer.ProtocolA2A || t.Protocol == normalizer.ProtocolA2A) && !Retried(t, env) {
			if err := tc.CheckTaskOpen(in.Ctx, t); err != nil {
				host.AnswerSubmitError(rep, err)
				return nil, false
			}
		}
		// A continued task keeps its context when the message names none
		// (the adapter made up a new one); a message naming another
		// context than its task's is refused (A2A: the agent MUST reject
		// it; it would be taken as a turn of the other conversation).
		created, _ := env.Provenance.Details[normalizer.DetailContextCreated].(bool)
		if err := CheckTaskContext(env.ContextID, created, t.ContextID); err != nil {
			rep.Error(jsonrpc.InvalidParams(err.Error()))
			return nil, false
		}
		if env.ContextID == "" || (created && t.ContextID != "") {
			env.ContextID = t.ContextID
			delete(env.Provenance.Details, normalizer.DetailContextCreated)
		}
		return t, true
	}
	// A new context is claimed as the caller's by the submission; one the
	// client chose must be the caller's own already.
	return nil, true
}

// ClaimsContext reports whether a message's context id is claimed for
// the caller (host.Submission.ClaimContext; another principal's is a
// conflict): a new task's, and a continued task's when its record prev
// holds no context (a task an E2A request started) and the message names
// one: the turn's context is then the message's, which no record checked.
func ClaimsContext(env *e2a.Envelope, continued bool, prev *host.Task) bool {
	if env.TaskID == "" || !continued {
		return true
	}
	return prev != nil && prev.ContextID == "" && env.ContextID != ""
}

// Retried reports whether env is the retry of a turn the task t holds
// already (its request id, an Idempotency-Key, on t's record): Submit
// answers it as the duplicate it is, the first call's answer, and
// publishes nothing, even once the task has ended since; the check that
// the task is open (host.Tasks.CheckTaskOpen) is for a new message.
func Retried(t *host.Task, env *e2a.Envelope) bool {
	return env.RequestID != "" && slices.Contains(t.RequestIDs, env.RequestID)
}

// errAnswered ends a submission whose Before answered the call itself.
var errAnswered = errors.New("a2a: answered")

// blockingSend reports whether a message/send waits for its answer (not
// configuration.blocking false).
func blockingSend(env *e2a.Envelope) bool {
	b, ok := env.Params["blocking"].(bool)
	return !ok || b
}

// serveStream writes message/stream's SSE answer for the task's turn
// requestID with serve: the frames from the resume point of r
// (Last-Event-ID or ?from=; serve ends the answer with the error of a bad
// one) and then, when the turn ends the task while later (nil: never)
// finds a turn after it in the task's record, that turn's frames in the
// same stream (the turn's end written final:false, its state submitted;
// the next turn opened with a working status and its event ids naming it,
// as serveTurns writes a resubscription's), and so on to the task's end
// (ServeFollowed, which also resumes in a later turn).
func serveStream(serve ServeFunc, w http.ResponseWriter, r *http.Request, requestID string, p a2amap.Params, later LaterFunc) {
	first := p
	ServeFollowed(serve, StreamFormat, w, r, requestID, later, func(o *render.Output, t FollowedTurn) (render.Renderer, func() (string, bool)) {
		p := first
		if t.Followed {
			p = a2amap.Params{JSONRPCID: p.JSONRPCID, TaskID: p.TaskID, ContextID: p.ContextID, Resubscribe: true,
				AcceptedOutputModes: p.AcceptedOutputModes, Interaction: p.Interaction}
		}
		s := newStream(o, t.ID, p, t.From)
		s.next = t.Opened
		s.later = later.After(r.Context(), t.ID)
		return s, func() (string, bool) { return s.nextTurn, s.done }
	})
}

// ServeFunc serves the frames of a request with a renderer (host.Answerer.Serve).
type ServeFunc = func(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer)

// FollowedTurn is a turn ServeFollowed serves: its request ID, from
// sequence From; Followed: a later turn than the call's own (its events as
// a resubscription's, each id "<ID>:<seq>"); Opened: the response's head
// is written (a turn served before it in the response).
type FollowedTurn struct {
	ID               string
	From             int64
	Followed, Opened bool
}

// maxFollowHops bounds the walk from a call's turn to the later turn a
// resume point names (the turns a stream has followed).
const maxFollowHops = 64

// ServeFollowed serves a task's turn requestID with serve in format, its
// renderer made by newTurn, and then each later turn its renderer names
// once it has ended (next, "" for none: its end is the task's), in the
// same response, from its first frame. It ends after a turn that names
// none, or with one that ends with an error (clean false) or the client
// gone.
//
// The resume point of r (Last-Event-ID or ?from=) is a plain sequence of
// requestID's frames, or "<turn>:<seq>", an event id of a followed turn:
// the stream then resumes in that turn (found by later from requestID; a
// turn not found drops the resume point, as a resubscription does). A
// turn whose end lies before the resume point renders nothing: the turn
// after it (later) follows. The A2A v0.3, v1.0 and AgentVault streams of a
// turn (message/stream, SendStreamingMessage, tasks/sendSubscribe) so go on
// with a turn queued behind theirs (a terminal state is final).
func ServeFollowed(serve ServeFunc, format string, w http.ResponseWriter, r *http.Request, requestID string, later LaterFunc,
	newTurn func(o *render.Output, t FollowedTurn) (render.Renderer, func() (next string, clean bool))) {
	t := FollowedTurn{ID: requestID}
	t.From, _ = egress.ResumePoint(r)
	if turn, from, ok := turnResumePoint(r); ok {
		t.From = 0
		if turn == requestID || laterTurnOf(r.Context(), later, requestID, turn) {
			t.ID, t.From, t.Followed = turn, from, turn != requestID
		}
		r = withResumePoint(r, t.From)
	}
	for {
		var status func() (string, bool)
		var out *render.Output
		cur := t
		serve(w, r, cur.ID, format, func(o *render.Output) render.Renderer {
			rd, st := newTurn(o, cur)
			if b, ok := rd.(interface{ SetIDPrefix(string) }); ok && cur.Followed {
				b.SetIDPrefix(cur.ID + ":")
			}
			status, out = st, o
			return rd
		})
		if status == nil || out.Err() != nil || r.Context().Err() != nil {
			return
		}
		next, clean := status()
		if next == "" && clean && cur.From > 0 && later != nil {
			// Its end lies before the resume point: what follows it.
			next = later(r.Context(), cur.ID)
		}
		if next == "" {
			return
		}
		if !t.Opened {
			w, r = ContinuedResponse{w}, egress.WithoutResumePoint(r)
		}
		t = FollowedTurn{ID: next, Followed: true, Opened: true}
	}
}

// laterTurnOf reports whether turn follows requestID in its task's record
// (later, from requestID on, at most maxFollowHops turns).
func laterTurnOf(ctx context.Context, later LaterFunc, requestID, turn string) bool {
	if later == nil {
		return false
	}
	for id, i := requestID, 0; i < maxFollowHops; i++ {
		if id = later(ctx, id); id == "" {
			return false
		} else if id == turn {
			return true
		}
	}
	return false
}

// LaterFunc returns the turn a task's record lists after the turn after
// now ("" when none, or the record cannot be read): LaterTurns's.
type LaterFunc func(ctx context.Context, after string) string

// LaterTurns is the LaterFunc of the task taskID read by tasks
// (host.Tasks.LaterTurn); nil when taskID is "" (no task: nothing
// follows).
func LaterTurns(tasks host.Tasks, taskID string) LaterFunc {
	if taskID == "" {
		return nil
	}
	t := &host.Task{Session: host.Session{ID: taskID}}
	return func(ctx context.Context, after string) string {
		next, _ := tasks.LaterTurn(ctx, t, after) // unreadable: the turn's end as it is
		return next
	}
}

// After is l for the turn after, read with ctx when called: a stream
// renderer's later; nil when l is.
func (l LaterFunc) After(ctx context.Context, after string) func() string {
	if l == nil {
		return nil
	}
	return func() string { return l(ctx, after) }
}

// serveTurns writes tasks/resubscribe's SSE answer for the turns of a
// task (oldest first) with serve, one after the other in one stream: each
// turn's frames to its final frame, the first's from the resume point of
// r (Last-Event-ID or ?from=, a plain sequence: resubscribe has turned
// one naming a turn into that), the later ones' from their first. Each
// event id names its turn: "<requestID>:<seq>" (StreamBase.IDPrefix), a
// resume point that turnResumePoint reads. The final status of every
// turn but the last is written final:false and submitted (the task goes on
// with the next turn: a terminal state is final), and the stream goes on with
// the next turn (its events opened with a working status, as a
// resubscribed stream opens); it ends after the last turn's final frame,
// or with the first turn that ends without its final frame (an error, the
// client gone). A first turn whose final frame is before the resume point
// has nothing more to write: the stream goes on with the next turn. When
// the last turn ends the task while later (nil: never) finds a turn
// recorded after it since, the stream goes on with that one too, as
// serveStream's does.
func serveTurns(serve ServeFunc, w http.ResponseWriter, r *http.Request, turns []string, p a2amap.Params, later LaterFunc) {
	from, _ := egress.ResumePoint(r)
	opened := false // the stream's head is written
	for i := 0; i < len(turns); i++ {
		id := turns[i]
		var s *stream
		tw := w
		if i == 0 && from > 0 && len(turns) > 1 {
			// egress answers 204 a resume point after a stored turn's
			// final frame: the next turn opens the stream then.
			tw = &skippedTurn{ResponseWriter: w}
		}
		serve(tw, r, id, StreamFormat, func(o *render.Output) render.Renderer {
			s = newStream(o, id, p, from)
			s.more, s.next = i < len(turns)-1, opened
			s.IDPrefix = id + ":"
			if !s.more {
				s.later = later.After(r.Context(), id)
			}
			return s
		})
		if s == nil || s.Out.Err() != nil || r.Context().Err() != nil {
			return
		}
		if !s.ended && !(i == 0 && from > 0 && s.done) {
			return
		}
		if s.nextTurn != "" {
			turns = append(turns, s.nextTurn)
		}
		if !opened && s.opened {
			opened = true
			// The next turns into the stream already open.
			w = ContinuedResponse{w}
		}
		if i == 0 {
			// The next turns from their first frame.
			r = egress.WithoutResumePoint(r)
			from = 0
		}
	}
}

// turnResumePoint is the resume point of r when it names a turn, a
// stream of several turns' event id "<requestID>:<seq>" (serveTurns):
// the turn's request id and the first sequence asked for (after seq in
// Last-Event-ID, seq in ?from=, as egress.ResumePoint reads a plain
// one). ok is false for any other resume point, or none.
func turnResumePoint(r *http.Request) (turn string, from int64, ok bool) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	after := v != ""
	if !after {
		v = r.URL.Query().Get("from")
	}
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil || n < -1 || n < 0 && !after {
		return "", 0, false
	}
	if after && n < math.MaxInt64 {
		n++
	}
	return v[:i], n, true
}

// withResumePoint is r with the resume point from (?from=, a plain
// sequence), none when from is 0.
func withResumePoint(r *http.Request, from int64) *http.Request {
	without := egress.WithoutResumePoint(r)
	if from > 0 && without == r {
		without = r.Clone(r.Context()) // not the caller's request
	}
	r = without
	if from > 0 {
		q := r.URL.Query()
		q.Set("from", strconv.FormatInt(from, 10))
		r.URL.RawQuery = q.Encode()
	}
	return r
}

// skippedTurn is the response of serveTurns' first turn served from a
// resume point: a 204 (No Content: the turn's final frame is before the
// resume point) is not written, the next turn's stream opening the
// response instead.
type skippedTurn struct {
	http.ResponseWriter
	noContent bool
}

func (s *skippedTurn) WriteHeader(code int) {
	if code == http.StatusNoContent {
		s.noContent = true
		return
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap is the response (http.ResponseController flushes it).
func (s *skippedTurn) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// ContinuedResponse is a response whose head is written already: the
// next turn's stream writes its events after the last turn's (A2A v0.3's
// and v1.0's multi-turn streams).
type ContinuedResponse struct{ http.ResponseWriter }

func (ContinuedResponse) WriteHeader(int) {}

// Unwrap is the response (http.ResponseController flushes it).
func (c ContinuedResponse) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Interaction reports whether the client declared the trpc interaction
// spec: interaction_spec_version in the message metadata (the spec's way),
// or [InteractionExtension] in the X-A2A-Extensions (v0.3) or
// A2A-Extensions (v1.0) header.
func Interaction(header http.Header, env *e2a.Envelope) bool {
	if env.Provenance != nil {
		if v, _ := env.Provenance.Details[normalizer.DetailInteractionSpecVersion].(string); v != "" {
			return true
		}
	}
	// The names in their canonical form, read from the map: Values would
	// canonicalise (allocate) them on every call.
	for _, name := range [...]string{"X-A2a-Extensions", "A2a-Extensions"} {
		for _, h := range header[name] {
			for _, u := range strings.Split(h, ",") {
				if strings.TrimSpace(u) == InteractionExtension {
					return true
				}
			}
		}
	}
	return false
}

// TurnEnded is the a2amap.Params.TurnEnded of the blocking answer to the
// turn requestID (of env) of the task prev (its record when the turn was
// accepted): the task's record read again from tasks then, given to end
// (Answers.TurnEnd) with prev, and its listing (host.Tasks.Listing: the
// leader's record, where a replica a write behind could miss a turn just
// appended) in end's context (egress.WithListing), which end reads the
// record again with.
func TurnEnded(ctx context.Context, tasks host.Tasks, prev *host.Task, env *e2a.Envelope, requestID string,
	end func(ctx context.Context, now, prev *host.Task, env *e2a.Envelope, requestID string) a2amap.TurnEnd) func() a2amap.TurnEnd {
	return func() a2amap.TurnEnd {
		now, err := tasks.Task(ctx, env.TaskID, tenant.Read)
		if err != nil {
			now = nil
		}
		return end(egress.WithListing(ctx, tasks.Listing(env.TaskID)), now, prev, env, requestID)
	}
}

// ErrContextMismatch: a message continuing a task names another context
// than the task's (A2A: the agent MUST reject it).
var ErrContextMismatch = errors.New("the message's contextId is not its task's")

// CheckTaskContext checks the context a message continuing a task names
// (contextID; created: made up by the adapter, the message named none)
// against the task's (taskContext): ErrContextMismatch, naming both, when
// the message named another one.
func CheckTaskContext(contextID string, created bool, taskContext string) error {
	if contextID == "" || created || taskContext == "" || contextID == taskContext {
		return nil
	}
	return fmt.Errorf("%w: the message names context %q, its task is in %q", ErrContextMismatch, contextID, taskContext)
}

// Continued reports whether the adapter marked the request as continuing
// an existing task.
func Continued(env *e2a.Envelope) bool {
	if env.Provenance == nil {
		return false
	}
	v, _ := env.Provenance.Details[normalizer.DetailTaskContinued].(bool)
	return v
}

// HistoryLength is the historyLength the request asked for, nil when none.
func HistoryLength(env *e2a.Envelope) *int {
	if env.Params == nil {
		return nil
	}
	if _, ok := env.Params["history_length"]; !ok {
		return nil
	}
	n := int(env.ParamInt("history_length", 0))
	return &n
}

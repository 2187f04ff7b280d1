package e2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Routes are the HTTP routes of the front door over h, for the registry:
// POST /v1/requests.
func Routes(h host.Host) []host.Route {
	return []host.Route{{Method: http.MethodPost, Path: Path, Handler: NewHandler(h)}}
}

// NewHandler returns the handler of POST /v1/requests over h. The body (an
// E2A envelope or a legacy AgentRequest, ?agent= naming the pool when the
// body does not) is published to its pool; the answer is 202 with
// [AcceptedBody], or, when the client asks for it, the request's frames
// at once: SSE or NDJSON (Accept), or the JSON view once the final frame
// is in (?wait=true), each taking one of the caller's stream slots. A
// refusal is an E2A error body: 400 (invalid_request, invalid_request_id,
// invalid_agent; bad_request for a malformed resume point, Last-Event-ID
// or ?from=, of a streamed or awaited answer), 404 unknown_agent, 409
// conflict (the request id, task_id or session_id is another principal's:
// nothing of it is revealed), 409 task_terminal (the task_id names an A2A
// task that has finished), 413 body_too_large, 429 (rate limit, stream
// slots; too_many_turns: the task_id or session_id has as many turns
// waiting behind its running one as E2A_MAX_WAITING_TURNS allows), 503 unavailable (retryable); nothing is published on any of
// them.
//
// A request with a task_id is a turn of that task, whichever protocol
// started it (admitTurn): recorded on the task before it is published,
// and run once the task's earlier turn has ended, never beside it; a
// task_id not known yet starts a new task of the caller's. A session_id
// naming an ACP session makes the request a turn of that session; any
// other session_id is E2A's own label, with no record. A turn goes to the
// pool of its task or session; one naming another pool (?agent=, a pool's
// path) is refused 409 conflict, nothing published.
func NewHandler(h host.Host) http.Handler { return &frontDoor{h: h} }

// frontDoor serves POST /v1/requests.
type frontDoor struct{ h host.Host }

var _ http.Handler = (*frontDoor)(nil)

// wantsStream reports whether the client asked for a streamed answer, as
// egress negotiates it (ServeE2A).
func wantsStream(r *http.Request) bool {
	return egress.NegotiateE2A(r) != "application/json"
}

func (d *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := d.h.Admit(w, r, Name, Refuse)
	if !ok {
		return
	}
	body, ok := readBody(w, r, d.h.MaxBody())
	if !ok {
		return
	}
	res, err := d.h.Normalizer().FromE2A(c.Input(r, body, egress.QueryValue(r, "agent")))
	if err != nil {
		code := CodeInvalidRequest
		if errors.Is(err, subjects.ErrInvalidID) {
			code = CodeInvalidRequestID
		}
		WriteError(w, normalizer.HTTPStatus(err), code, egress.ClientMessage(err), false)
		return
	}
	env, pool := res.Envelope, res.Pool
	if subjects.ValidatePool(pool) != nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidAgent, fmt.Sprintf("agent %q must match [A-Za-z0-9_-]{1,64}", pool), false)
		return
	}
	wait, err := egress.AnswerParams(r)
	if err != nil {
		// Refused as the read API refuses it, nothing published.
		egress.WriteError(w, err)
		return
	}
	stream := wantsStream(r)
	if stream || wait {
		// The resume point of the answer (Last-Event-ID, ?from=) is read
		// as egress reads it (ServeE2A), before the publish: a malformed
		// one is refused with nothing published.
		if _, err := egress.ResumePoint(r); err != nil {
			egress.WriteError(w, err)
			return
		}
	}
	if stream {
		env.IsStream = true // else the body's is_stream, as the client sent it
	}
	// A request naming a task (or an ACP session) is one of its turns,
	// checked against the caller before anything is published.
	turn, ok := admitTurn(r.Context(), w, c, env, pool)
	if !ok {
		return
	}
	if turn != nil && turn.Task.Pool != "" && egress.QueryValue(r, "agent") == "" {
		// A turn goes to the pool that holds its task (or ACP session)
		// unless the client names one (?agent=, a pool's own path): the
		// routing rule's default pool has never seen the task.
		pool = turn.Task.Pool
	}
	// A streamed answer (or one awaited) takes one of the caller's stream
	// slots and subscribes to the frames before the publish: a new
	// request's stream then opens without reading E2A_RESPONSES.
	sub, err := c.Submit(r.Context(), host.Submission{Pool: pool, Envelope: env, Turn: turn, Slot: stream || wait, Prepare: stream})
	if err != nil {
		refuseSubmit(w, err, turn)
		return
	}
	defer sub.Done()
	acc := sub.Accepted
	if acc.Warning != "" {
		w.Header().Set(HeaderWarning, acc.Warning)
	}
	if stream || wait {
		d.h.ServeE2A(w, sub.Answering(r), acc.RequestID)
		return
	}
	writeJSON(w, http.StatusAccepted, AcceptedBody{
		RequestID: acc.RequestID,
		Pool:      acc.Pool,
		Duplicate: acc.Duplicate,
		Warning:   acc.Warning,
		Links:     Links(acc.RequestID),
	})
}

// unavailable is the refusal of a request the pipeline could not accept
// (backpressure, its publish cut by the server's shutdown): 503
// unavailable, retryable after a second, the wait its answer renders
// (Refuse) as any refusal's.
var unavailable = host.Refusal{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
	Message: "the pipeline could not accept the request; retry later", Retryable: true, RetryAfter: time.Second}

// readBody reads at most limit bytes. It answers 413 itself and returns
// ok=false when the body is larger, 400 on a read error.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			WriteError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "request body exceeds "+strconv.FormatInt(limit, 10)+" bytes", false)
			return nil, false
		}
		WriteError(w, http.StatusBadRequest, CodeReadError, "could not read the request body", true)
		return nil, false
	}
	return data, true
}

// refuseSubmit answers a request whose Submit failed with err (turn the
// turn it was, nil for a new request): each of the host's errors in E2A's
// words, nothing of another principal's.
func refuseSubmit(w http.ResponseWriter, err error, turn *host.Turn) {
	switch {
	case errors.Is(err, host.ErrSessionNotFound), errors.Is(err, host.ErrTaskTerminal):
		// The turn's record refused it: another principal's task,
		// made since admitTurn looked, or an A2A task canceled since.
		field := "task_id"
		if turn != nil && turn.Session {
			field = "session_id"
		}
		refuseTurn(w, err, field)
	case errors.Is(err, host.ErrTooManyStreams):
		Refuse(w, host.TooManyStreams) // its own wait
	case errors.Is(err, host.ErrTooManyTurns):
		Refuse(w, host.TooManyTurns)
	case errors.Is(err, host.ErrTurnConflict):
		WriteError(w, http.StatusConflict, CodeConflict, egress.ClientMessage(err), false)
	case errors.Is(err, host.ErrContextConflict):
		WriteError(w, http.StatusConflict, CodeConflict, "context_id is already in use; choose another", false)
	case errors.Is(err, host.ErrConflict):
		WriteError(w, http.StatusConflict, CodeConflict, "request_id is already in use; choose another", false)
	case errors.Is(err, host.ErrTooLarge):
		WriteError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, egress.ClientMessage(err), false)
	case errors.Is(err, host.ErrUnknownPool):
		WriteError(w, http.StatusNotFound, CodeUnknownAgent, egress.ClientMessage(err), false)
	case errors.Is(err, egress.ErrShuttingDown):
		f := unavailable // its message names the request, to read again
		f.Message = egress.ClientMessage(err)
		Refuse(w, f)
	case errors.Is(err, context.Canceled):
		WriteError(w, 499, CodeClientClosed, "client went away before the request was accepted", true)
	default:
		Refuse(w, unavailable)
	}
}

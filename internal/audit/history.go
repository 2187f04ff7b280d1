package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// The Auditor is the E2A read API's history (egress.WithHistory): what
// GET /v1/requests/{id}[/stream] answers for a request the hot streams no
// longer hold.
var _ egress.History = (*Auditor)(nil)

// DefaultHistorySpan is how long after its request Request reads a
// request's frames when E2A_RESPONSES has no max age to go by.
const DefaultHistorySpan = 24 * time.Hour

// Request is egress.History over the audit history: request id found as
// Replay finds it by id (Query{RequestIDs: {id}, Source: SourceAudit}:
// E2A_AUDIT, and the archive for what E2A_AUDIT no longer holds), with
// every search bounded by the time in the id, so that a miss costs as
// little as a hit:
//
//   - only a UUIDv7 id is looked up (egress.RequestIDTime, as the read API
//     asks only for those); any other is not found at once, without a
//     read;
//   - the envelope is searched in its partition over the clock margin
//     around that time (WithClockMargin) and no further, where Replay
//     goes on to scan from the start of the history;
//   - its frames are read from around the envelope's copy up to the one
//     holding the final frame, and no further than E2A_RESPONSES' max age
//     after it (DefaultHistorySpan when it has none: a request that ran
//     longer is not answered whole by the hot streams either);
//   - a request whose envelope the history does not hold is not found
//     (its owner is unknown);
//   - a frame naming a user_id other than the envelope's is left out:
//     another principal's request under the same id (userID).
//
// It returns the envelope's bytes and the frames in order, a stored burst
// split into its frames, each with the E2A_RESPONSES sequence of the
// message that held it; not found is an error wrapping egress.ErrNotFound,
// a request (or the miss of one) only a corrupt archive batch may hold an
// error wrapping ErrHistoryCorrupt (permanent: no retry reads it), any
// other error a read that may succeed later. The frames are not checked
// here: the read API checks them as it checks the hot streams' (the
// invariant checks of Replay report, they do not refuse). It holds one
// request's messages in memory.
func (a *Auditor) Request(ctx context.Context, id string) (egress.HistoricRequest, error) {
	t, ok := egress.RequestIDTime(id)
	if !ok {
		return egress.HistoricRequest{}, fmt.Errorf("%w: %q carries no time to search the history from", egress.ErrNotFound, id)
	}
	return a.request(ctx, id, t, time.Time{})
}

// The Auditor finds a client's own request_id by its first hot frame's
// time too.
var _ egress.HistoryNear = (*Auditor)(nil)

// RequestNear is egress.HistoryNear: Request for an id that carries no
// time (a client's own request_id), its envelope searched in the window
// Request searches around a UUIDv7 id's time, around near instead (the
// clock margin, WithClockMargin: found when the request waited less than
// that in its pool's queue before its first frame). A UUIDv7 id is
// searched by its own time, as Request does.
func (a *Auditor) RequestNear(ctx context.Context, id string, near time.Time) (egress.HistoricRequest, error) {
	if t, ok := egress.RequestIDTime(id); ok {
		return a.request(ctx, id, t, time.Time{})
	}
	if near.IsZero() {
		return egress.HistoricRequest{}, fmt.Errorf("%w: %q: no time to search the history from", egress.ErrNotFound, id)
	}
	return a.request(ctx, id, near, near)
}

// request is Request and RequestNear: id searched around t (near, when
// set, is t for an id without a time).
func (a *Auditor) request(ctx context.Context, id string, t, near time.Time) (_ egress.HistoricRequest, err error) {
	defer func() { err = corrupt(err) }()
	if subjects.ValidateID(id) != nil {
		return egress.HistoricRequest{}, fmt.Errorf("%w: %q is not a request id", egress.ErrNotFound, id)
	}
	responses, err := a.state(ctx, streams.ResponsesStream)
	if err != nil {
		return egress.HistoricRequest{}, err
	}
	rc := &replayCtx{q: Query{RequestIDs: []string{id}, Source: SourceAudit, Since: t.Add(-a.margin)}, bounded: true, near: near, span: DefaultHistorySpan}
	if responses.maxAge > 0 {
		rc.span = responses.maxAge
	}
	if rc.audit, err = a.state(ctx, streams.AuditStream); err != nil {
		return egress.HistoricRequest{}, err
	}
	if !rc.audit.exists {
		return egress.HistoricRequest{}, fmt.Errorf("%w: %q: no stream %s", egress.ErrNotFound, id, streams.AuditStream)
	}
	if rc.audit, err = a.withArchive(ctx, rc.audit); err != nil {
		return egress.HistoricRequest{}, err
	}
	f, err := a.findByID(ctx, rc, id)
	if err != nil {
		return egress.HistoricRequest{}, err
	}
	if f.req == nil {
		return egress.HistoricRequest{}, fmt.Errorf("%w: %q is not in the audit history", egress.ErrNotFound, id)
	}
	h := egress.HistoricRequest{Envelope: f.req.data, Subject: f.req.subject, Stored: f.req.time}
	owner := userID(f.req.data)
	for _, m := range f.frames {
		frames, _ := m.frames() // a malformed burst's pieces: the read API refuses them
		seq := m.originSeq(streams.ResponsesStream)
		for _, fr := range frames {
			if u := userID(fr); u != "" && u != owner {
				continue // another principal's request under the same id
			}
			h.Frames = append(h.Frames, egress.HistoricFrame{Raw: fr, StreamSeq: seq})
		}
	}
	return h, nil
}

// userID is the user_id of a stored envelope or frame ("" when it has
// none or is not JSON). A frame carries its envelope's (e2a.ResponseFor),
// which tells one principal's frames from another's under a request id
// taken again once the first request left the hot streams (ingress
// refuses that only while they hold it): the history holds both requests'
// messages, and the envelope Request finds is the first in the id's
// window.
func userID(data []byte) string {
	var probe struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal(data, &probe)
	return probe.UserID
}

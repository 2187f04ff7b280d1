package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// CancelResult tells what Cancel did.
type CancelResult struct {
	// AlreadyFinished is true when the request's final frame was already
	// written: nothing was published and nothing changes.
	AlreadyFinished bool
	// Final is that final frame (when AlreadyFinished).
	Final *e2a.Response
	// Published is true when the cancel was stored on the request's control
	// subject. The worker holding the request (or the one that picks it up
	// later) cancels the handler and writes the final e2a.error frame with
	// code cancelled, unless the request finishes first.
	Published bool
}

// cancelPublishTimeout bounds Cancel's publish, its retries included.
const cancelPublishTimeout = 10 * time.Second

// Cancel asks for the cancellation of a request: it publishes a cancel on
// e2a.ctl.<id> (stream E2A_CONTROL keeps the latest per request, so a late
// pick-up still sees it), unless the request already has its final frame, in
// which case nothing is published and the result says so.
//
// A request that finishes between the check and the cancel keeps its final
// frame; the stored cancel then changes nothing.
//
// A nil js is refused with ErrInvalidOption.
//
// Cancel a request after it is published (ingress always does: over HTTP
// it reads the request's owner first; ACP stdio, which knows a prompt's id
// before publishing it, waits for the publish). A worker proves that a
// request stored after it started has no cancel from the cancels it
// received live, so a cancel stored before its request can be missed by a
// worker that started between the two; and a cancel stored more than a
// minute before its request (staleCancelMargin) is taken for an earlier
// request's under the same id, and ignored.
func Cancel(ctx context.Context, js jetstream.JetStream, requestID string) (CancelResult, error) {
	var res CancelResult
	if js == nil {
		return res, fmt.Errorf("%w: nil JetStream", ErrInvalidOption)
	}
	respSubj, err := subjects.Response(requestID)
	if err != nil {
		return res, err
	}
	ctlSubj, err := subjects.Control(requestID)
	if err != nil {
		return res, err
	}
	last, err := lastMsg(ctx, js, defaultStreams.Responses, respSubj)
	if err != nil {
		return res, fmt.Errorf("agent: cancel %q: reading frames: %w", requestID, err)
	}
	if last != nil {
		// The last message's last frame (a message may hold a burst).
		if data, _, ferr := e2a.LastInBurst(last.header.Get(subjects.HeaderFrames), last.data); ferr == nil {
			if f, ferr := e2a.ResponseFromJSON(data); ferr == nil && f.IsFinal {
				res.AlreadyFinished, res.Final = true, f
				return res, nil
			}
		}
	}
	body, _ := json.Marshal(controlMsg{Type: ControlCancel, RequestID: requestID, Timestamp: e2a.FormatTime(time.Now())})
	m := nats.NewMsg(ctlSubj)
	m.Data = body
	if headerSafe(requestID) {
		m.Header.Set(subjects.HeaderRequestID, requestID)
	}
	// Attempts are bounded and retried (publishAcked): a publish lost while
	// a cluster's routes change would otherwise wait for ctx's end. The
	// whole is bounded too: a cluster without a control stream answers
	// within cancelPublishTimeout.
	pctx, cancel := context.WithTimeout(ctx, cancelPublishTimeout)
	defer cancel()
	if _, err := publishAcked(pctx, js.Conn(), m); err != nil {
		return res, fmt.Errorf("agent: cancel %q: %w", requestID, err)
	}
	res.Published = true
	return res, nil
}

package egress

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// requestLookupSubject returns the filter matching the request subject of
// requestID whatever its agent pool (e2a.req.*.<token>).
func requestLookupSubject(requestID string) (string, error) {
	return subjects.RequestAnyPool(requestID)
}

// lookupRequest reads the envelope message of requestID from the request
// stream; it returns nil when there is none. A direct get reads it, which
// any replica may answer; when it finds none, the stream's leader
// confirms the absence (confirmRequest): in a cluster a follower may lag
// the leader, more so under load, and a request accepted a moment ago must
// not be called unknown.
func lookupRequest(ctx context.Context, m *streams.DirectGetter, stream, requestID string) (*nats.Msg, error) {
	subj, err := requestLookupSubject(requestID)
	if err != nil {
		return nil, nil
	}
	msg, err := m.GetLast(ctx, stream, subj)
	if err != nil || msg != nil {
		return msg, err
	}
	return m.ConfirmLast(ctx, stream, subj)
}

// confirmRequest is lookupRequest's confirmation alone: the envelope
// message of requestID as the request stream's leader holds it.
func confirmRequest(ctx context.Context, m *streams.DirectGetter, stream, requestID string) (*nats.Msg, error) {
	subj, err := requestLookupSubject(requestID)
	if err != nil {
		return nil, nil
	}
	return m.ConfirmLast(ctx, stream, subj)
}

func responseSubject(id string) (string, error) { return subjects.Response(id) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Stored is [Service.Owner] with the agent pool the request is queued in:
// the pool of the subject its envelope is stored under ("" when found is
// false, or for a subject that names none). Ingress asks it for a
// duplicate, whose answer names the stored request's pool, not the
// retry's.
func (s *Service) Stored(ctx context.Context, requestID string) (owner, pool string, found bool, err error) {
	msg, err := s.findRequest(ctx, requestID)
	if err != nil || msg == nil {
		return "", "", false, err
	}
	return ownerOf(msg), poolOf(msg), true, nil
}

// poolOf returns the agent pool of a stored request message, from the
// subject it was stored under: the Nats-Subject header of a direct get's
// reply, else the message's subject (a leader's get). "" when neither is a
// request subject.
func poolOf(msg *nats.Msg) string {
	subj := msg.Header.Get(subjects.HeaderSubject)
	if subj == "" {
		subj = msg.Subject
	}
	pool, _, err := subjects.ParseRequest(subj)
	if err != nil {
		return ""
	}
	return pool
}

// AwaitRequests waits, up to within, until the request stream holds each
// of ids: a task's or session's record lists a turn before it is
// published (ingress appends it first), so a turn listed and not stored
// yet is one whose publish is under way. It reports whether all are
// stored; false when within passes or ctx ends first (a publish that
// failed: the record lets its turn go), with the error of a read that
// failed.
func (s *Service) AwaitRequests(ctx context.Context, ids []string, within time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	wait := 2 * time.Millisecond
	for _, id := range ids {
		for {
			ok, err := requestExists(ctx, s.mux, s.streamNames().requests, id)
			if ctx.Err() != nil {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if ok {
				break
			}
			if sleepctx.Sleep(ctx, wait) != nil {
				return false, nil
			}
			wait = min(2*wait, 100*time.Millisecond)
		}
	}
	return true, nil
}

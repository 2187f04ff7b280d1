package egress

import (
	"context"
	"encoding/json"
	"slices"
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
	if err == nil && msg == nil {
		msg, err = m.ConfirmLast(ctx, stream, subj)
	}
	return msg, unanswered(ctx, err, requestID, "envelope")
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

// Listing reads the requests a task's or session's record lists now: the
// turns a reader finds listed but not stored waits for (AwaitListed). An
// error leaves every turn listed.
type Listing func(ctx context.Context) ([]string, error)

// listingKey is the context key of WithListing.
type listingKey struct{}

// WithListing returns ctx carrying l, the listing of the record whose turns
// are awaited with ctx: AwaitRequests (and so UnendedTurnsAwaited,
// CancelTurns) is then AwaitListed with l, and ingress's cancel of a turn
// listed but not stored (which awaits its store) reads it too.
func WithListing(ctx context.Context, l Listing) context.Context {
	return context.WithValue(ctx, listingKey{}, l)
}

// ListingOf is the Listing ctx carries (WithListing), nil when none.
func ListingOf(ctx context.Context) Listing {
	l, _ := ctx.Value(listingKey{}).(Listing)
	return l
}

// AwaitRequests is AwaitListed with the Listing ctx carries (WithListing;
// without one, each of ids is awaited until it is stored or within
// passes).
func (s *Service) AwaitRequests(ctx context.Context, ids []string, within time.Duration) (bool, error) {
	return s.AwaitListed(ctx, ids, within, ListingOf(ctx))
}

// AwaitListed waits, up to within, until each of ids is stored in the
// request stream or listed (a nil listed lists them all) no longer: a
// task's or session's record lists a turn before it is published (ingress
// appends it first), so a turn listed and not stored yet is one whose
// publish is under way, or one refused once recorded (ingress's stillOpen)
// or whose publish failed, taken out of the record again. A wait for that
// one to be stored lasted the whole of within (host.AwaitPublish, 6 s: a
// blocking answer, a cancel held that long). It reports whether all are
// stored; false when one is taken out of the record, within passes or ctx
// ends first, with the error of a read of the stream that failed. The
// record is read only while a turn is not stored, at each retry.
func (s *Service) AwaitListed(ctx context.Context, ids []string, within time.Duration, listed Listing) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	wait := 2 * time.Millisecond
	all := true
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
			if listed != nil {
				if now, err := listed(ctx); err == nil && !slices.Contains(now, id) {
					// Taken out of the record: it will not be stored, unless
					// its publish landed before its removal.
					if ok, err := requestExists(ctx, s.mux, s.streamNames().requests, id); err == nil && !ok {
						all = false
						break
					}
				}
			}
			if sleepctx.Sleep(ctx, wait) != nil {
				return false, nil
			}
			wait = min(2*wait, 100*time.Millisecond)
		}
	}
	return all, nil
}

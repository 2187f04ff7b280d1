package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// storedMsg is a message read back from a stream.
type storedMsg struct {
	seq     uint64    // stream sequence
	stored  time.Time // when it was stored (zero if the server did not say)
	subject string
	data    []byte
	header  nats.Header
}

// frameHead is what the runtime reads of a stored frame.
type frameHead struct {
	Sequence   int64  `json:"sequence"`
	IsFinal    bool   `json:"is_final"`
	ResponseID string `json:"response_id"`
}

// frame reads the last frame m holds: m itself, or the last of a burst.
func (m *storedMsg) frame() (frameHead, error) {
	var h frameHead
	last, _, err := e2a.LastInBurst(m.header.Get(subjects.HeaderFrames), m.data)
	if err != nil {
		return h, fmt.Errorf("agent: stored message at stream sequence %d: %w", m.seq, err)
	}
	if err := json.Unmarshal(last, &h); err != nil {
		return h, fmt.Errorf("agent: stored frame at stream sequence %d does not decode: %w", m.seq, err)
	}
	return h, nil
}

// lastMsg returns the last message stored under subject in stream, nil when
// there is none, with one direct get (answered by any replica, no consumer).
func lastMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*storedMsg, error) {
	return storedOrNone(streams.LastBySubject(ctx, js.Conn(), stream, subject))
}

// leaderLastMsg is lastMsg as the stream's leader holds it
// (streams.LeaderLastBySubject): the authoritative last message, for a
// writer whose fenced publish was refused. A direct get may be answered by
// a follower that lags the leader, and a stale answer there would look
// like frames lost or written by another worker.
func leaderLastMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*storedMsg, error) {
	return storedOrNone(streams.LeaderLastBySubject(ctx, js.Conn(), stream, subject))
}

// storedOrNone is the stored message of a last-by-subject read: nil when
// the subject holds none.
func storedOrNone(m streams.RawMsg, err error) (*storedMsg, error) {
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return fromRaw(m), nil
}

// msgAt returns the message at stream sequence seq if it is stored under
// subject (which may hold wildcards), nil otherwise.
func msgAt(ctx context.Context, js jetstream.JetStream, stream, subject string, seq uint64) (*storedMsg, error) {
	msgs, _, err := streams.DirectGetBatch(ctx, js.Conn(), stream, subject, seq, 1)
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 || msgs[0].Seq != seq {
		return nil, nil
	}
	return fromRaw(msgs[0]), nil
}

func fromRaw(m streams.RawMsg) *storedMsg {
	h := m.Header
	if h == nil {
		h = nats.Header{}
	}
	return &storedMsg{seq: m.Seq, stored: m.Time, subject: m.Subject, data: m.Data, header: h}
}

// isWrongLastSeq reports a publish refused because the subject's last
// sequence was not the expected one (10071; 10164 on replicated streams,
// also returned while another publish on the subject is being proposed).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// publishAcked publishes m and waits for its PubAck, each attempt bounded
// by maxAttempt and retried after a growing pause while the outcome is
// unknown: no answer (a message lost while a cluster's routes change, a
// stream leader being elected) or no stream responding yet. A refusal by
// the stream (an API error), a closed connection or the end of ctx is
// returned at once. Use it for messages a second copy of which changes
// nothing (a lease only fences more, a cancel is kept once per request).
func publishAcked(ctx context.Context, nc *nats.Conn, m *nats.Msg) (streams.PubAck, error) {
	backoff := 5 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, maxAttempt)
		ack, err := streams.Publish(attempt, nc, m)
		cancel()
		var apiErr *jetstream.APIError
		if err == nil || isClosed(err) || ctx.Err() != nil || errors.As(err, &apiErr) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return ack, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// isClosed reports an error after which nothing more can be sent on this
// connection.
func isClosed(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrConnectionDraining)
}

// headerSafe reports whether s can be a NATS header value as is.
func headerSafe(s string) bool {
	return s != "" && !strings.ContainsAny(s, "\r\n") && strings.TrimSpace(s) == s
}

// storeLease stores a lease message on subject (subjects.ResponseLease) and
// returns its stream sequence, retrying while the outcome is unknown (a
// later lease only fences more). Workers of earlier versions fenced the
// frames they sent in fast batches on the request's lease: a redelivery
// stores one so that none of those lands after it (a rolling upgrade).
func storeLease(ctx context.Context, nc *nats.Conn, subject, requestID, workerID string) (uint64, error) {
	m := nats.NewMsg(subject)
	if headerSafe(requestID) {
		m.Header.Set(subjects.HeaderRequestID, requestID)
	}
	m.Data = fmt.Appendf(nil, `{"worker":%q}`, workerID)
	ack, err := publishAcked(ctx, nc, m)
	if err != nil {
		return 0, fmt.Errorf("lease %s: %w", subject, err)
	}
	return ack.Seq, nil
}

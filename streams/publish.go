package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PubAck is what a stream answered a publish.
type PubAck struct {
	// Seq is the stream sequence the message was stored at (of the
	// original, for a duplicate).
	Seq uint64
	// Duplicate is true when the stream had the message's Nats-Msg-Id in
	// its duplicate window and stored nothing.
	Duplicate bool
}

// Publish publishes m to the stream bound to its subject and waits for the
// stream's acknowledgement, as jetstream.JetStream.PublishMsg does with
// jetstream.WithRetryAttempts(0): one request whose reply is the PubAck,
// and the same errors — jetstream.ErrNoStreamResponse when no stream
// listens on the subject, a *jetstream.APIError wrapped as "nats: %w" when
// the stream refuses the message (wrong expected sequence, too large…),
// jetstream.ErrInvalidJSAck for a reply that is not a PubAck, the
// connection's and the context's errors. Expectations are m's own headers
// (jetstream.ExpectedLastSubjSeqHeader…).
//
// The acknowledgement of a stored message is read without a reflective
// decode (any other shape goes to encoding/json): the agents' frame writes
// publish once per frame, and that decode was a tenth of their
// allocations. m is not kept.
func Publish(ctx context.Context, nc *nats.Conn, m *nats.Msg) (PubAck, error) {
	return pubAckOf(nc.RequestMsgWithContext(ctx, m))
}

// PublishWithin is Publish bounded by timeout instead of a context: the
// request waits on a timer from nats.go's pool, so a writer publishing
// message after message allocates no context and timer for each. A
// timeout is nats.ErrTimeout; the other errors are Publish's.
func PublishWithin(nc *nats.Conn, m *nats.Msg, timeout time.Duration) (PubAck, error) {
	return pubAckOf(nc.RequestMsg(m, timeout))
}

// pubAckOf reads the outcome of a publish's request: its reply, or its
// error (no responders: no stream listens on the subject).
func pubAckOf(resp *nats.Msg, err error) (PubAck, error) {
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return PubAck{}, jetstream.ErrNoStreamResponse
		}
		return PubAck{}, err
	}
	return readPubAck(resp.Data)
}

// readPubAck reads the reply to a JetStream publish.
func readPubAck(data []byte) (PubAck, error) {
	if a, ok := scanPubAck(data); ok {
		return a, nil
	}
	var r struct {
		Error     *jetstream.APIError `json:"error"`
		Stream    string              `json:"stream"`
		Seq       uint64              `json:"seq"`
		Duplicate bool                `json:"duplicate"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return PubAck{}, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return PubAck{}, fmt.Errorf("nats: %w", r.Error)
	}
	if r.Stream == "" {
		return PubAck{}, jetstream.ErrInvalidJSAck
	}
	return PubAck{Seq: r.Seq, Duplicate: r.Duplicate}, nil
}

// scanPubAck reads a PubAck in the form the server writes,
// {"stream":"<name>","seq":<n>} optionally followed by "domain" (a plain
// string) and "duplicate":true; ok is false for anything else (errors
// included), which readPubAck decodes with encoding/json.
func scanPubAck(b []byte) (a PubAck, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte(`{"stream":"`))
	if !found {
		return a, false
	}
	i := bytes.IndexByte(rest, '"')
	if i <= 0 || !plainString(rest[:i]) {
		return a, false
	}
	if rest, found = bytes.CutPrefix(rest[i+1:], []byte(`,"seq":`)); !found {
		return a, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		if n == 20 || (n > 0 && rest[0] == '0') {
			return a, false // longer than a uint64, or a leading zero
		}
		d := uint64(rest[n] - '0')
		if a.Seq > (1<<64-1-d)/10 {
			return a, false
		}
		a.Seq = a.Seq*10 + d
		n++
	}
	if n == 0 {
		return a, false
	}
	rest = rest[n:]
	if r, found := bytes.CutPrefix(rest, []byte(`,"domain":"`)); found {
		j := bytes.IndexByte(r, '"')
		if j < 0 || !plainString(r[:j]) {
			return a, false
		}
		rest = r[j+1:]
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"duplicate":true`)); found {
		a.Duplicate, rest = true, r
	}
	return a, len(rest) == 1 && rest[0] == '}'
}

// plainString reports whether b, the inside of a JSON string, has no
// escape and no control character (so it is read as it is).
func plainString(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}

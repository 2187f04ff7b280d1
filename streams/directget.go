package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// DefaultDirectGetTimeout bounds a direct get whose context has no deadline.
const DefaultDirectGetTimeout = 5 * time.Second

// MaxDirectGetBatch is the largest batch DirectGetBatch asks for.
const MaxDirectGetBatch = 1024

// RawMsg is a stored message read with a direct get.
type RawMsg struct {
	// Subject the message was stored under.
	Subject string
	// Seq is its stream sequence.
	Seq uint64
	// Time it was stored.
	Time time.Time
	// Header holds the headers the publisher set (nil if none); the
	// server's direct get headers (Nats-Stream, Nats-Subject, Nats-Sequence,
	// Nats-Time-Stamp, Nats-Num-Pending, Nats-Last-Sequence) are removed
	// and their values are in the fields above.
	Header nats.Header
	Data   []byte
}

// directGetRequest is the body of a $JS.API.DIRECT.GET.<stream> request
// (the server's JSApiMsgGetRequest).
type directGetRequest struct {
	Seq        uint64 `json:"seq,omitempty"`
	NextBySubj string `json:"next_by_subj,omitempty"`
	Batch      int    `json:"batch,omitempty"`
}

// Status values of direct get replies.
const (
	statusHeader      = "Status"
	descriptionHeader = "Description"
	statusEOB         = "204"
	statusNotFound    = "404"
	statusNoResponder = "503"
)

// DirectGetBatch reads up to batch messages stored under subject (which may
// hold wildcards) in stream, from stream sequence fromSeq on (0 means the
// start), without a consumer: one request to $JS.API.DIRECT.GET.<stream>,
// answered message by message and closed by an end-of-batch status. The
// stream needs AllowDirect.
//
// more reports that messages matching subject remain after the last one
// returned (at the time of the reply): ask again from its Seq + 1. The
// server may return fewer than batch messages when they are large.
//
// In a cluster any replica that is caught up may answer, and a follower can
// trail the leader by a few milliseconds: a reader that knows a message
// exists (it saw its sequence on the live subject) and does not get it
// should ask again.
//
// The server finds each next message of subject by scanning the stream from
// the previous one, so a call costs in proportion to the number of messages
// between the first and the last one returned (frames of requests streamed
// concurrently interleave).
//
// ctx bounds the call (DefaultDirectGetTimeout when it has no deadline).
// It returns ErrNoMessages when no message matches at or after fromSeq,
// ErrDirectGet when the stream does not answer (it does not exist or does
// not allow direct gets) or answers with an error status, ErrInvalidOptions
// for an empty stream or subject or a batch outside 1..MaxDirectGetBatch,
// and the context's or the connection's error otherwise.
func DirectGetBatch(ctx context.Context, nc *nats.Conn, stream, subject string, fromSeq uint64, batch int) (msgs []RawMsg, more bool, err error) {
	if err := checkStreamSubject(stream, subject); err != nil {
		return nil, false, err
	}
	if batch < 1 || batch > MaxDirectGetBatch {
		return nil, false, fmt.Errorf("%w: batch %d not in 1..%d", ErrInvalidOptions, batch, MaxDirectGetBatch)
	}
	if fromSeq == 0 {
		fromSeq = 1
	}
	// A context already done sends nothing: waiting below would race the
	// reply against ctx.Done() (select picks among ready cases at random).
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("direct get %s %s from %d: %w", stream, subject, fromSeq, err)
	}
	body, err := json.Marshal(directGetRequest{Seq: fromSeq, NextBySubj: subject, Batch: batch})
	if err != nil {
		return nil, false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDirectGetTimeout)
		defer cancel()
	}
	// The server sends at most batch messages and one status (end of batch
	// or error), so a channel of batch+1 never drops a reply. (A sync
	// subscription would allocate the client's default 64k-slot channel.)
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, batch+1)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subjects.DirectGet(stream), inbox, body); err != nil {
		return nil, false, err
	}
	msgs = make([]RawMsg, 0, batch)
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("direct get %s %s from %d: %w", stream, subject, fromSeq, ctx.Err())
		}
		switch st := ReplyStatus(m); st {
		case "":
			rm, err := rawMsg(m)
			if err != nil {
				return nil, false, err
			}
			msgs = append(msgs, rm)
		case statusEOB:
			np, _ := strconv.ParseUint(m.Header.Get(subjects.HeaderNumPending), 10, 64)
			return msgs, np > 0, nil
		default:
			return nil, false, statusError(stream, subject, m)
		}
	}
}

// DirectGetAll reads every message stored under subject in stream from
// sequence fromSeq on, in direct get batches of pageSize. On a subject that
// keeps growing it returns what was stored when its last page was read.
//
// It returns the errors of DirectGetBatch; ErrNoMessages when nothing
// matches.
func DirectGetAll(ctx context.Context, nc *nats.Conn, stream, subject string, fromSeq uint64, pageSize int) ([]RawMsg, error) {
	var all []RawMsg
	for m, err := range DirectGetSeq(ctx, nc, stream, subject, fromSeq, pageSize) {
		if err != nil {
			return nil, err
		}
		all = append(all, m)
	}
	if len(all) == 0 {
		return nil, ErrNoMessages
	}
	return all, nil
}

// DirectGetSeq iterates over the messages stored under subject in stream
// from sequence fromSeq on, reading them in direct get batches of pageSize
// as the loop goes. It yields nothing when no message matches, and stops
// after yielding an error of DirectGetBatch.
func DirectGetSeq(ctx context.Context, nc *nats.Conn, stream, subject string, fromSeq uint64, pageSize int) iter.Seq2[RawMsg, error] {
	return PageSeq(fromSeq, func(seq uint64) ([]RawMsg, bool, error) {
		return DirectGetBatch(ctx, nc, stream, subject, seq, pageSize)
	})
}

// PageSeq iterates over the messages of the pages page reads (a
// DirectGetBatch, or one wrapped in timeouts and retries) from sequence
// from on: page(seq) returns the messages from seq on and whether more
// follow; the next page starts after its last message. It yields nothing
// when page returns ErrNoMessages, and stops after yielding another error
// of page, or after a page that is empty or says no more follow.
func PageSeq(from uint64, page func(seq uint64) ([]RawMsg, bool, error)) iter.Seq2[RawMsg, error] {
	return func(yield func(RawMsg, error) bool) {
		seq := from
		for {
			msgs, more, err := page(seq)
			if errors.Is(err, ErrNoMessages) {
				return
			}
			if err != nil {
				yield(RawMsg{}, err)
				return
			}
			for _, m := range msgs {
				if !yield(m, nil) {
					return
				}
			}
			if !more || len(msgs) == 0 {
				return
			}
			seq = msgs[len(msgs)-1].Seq + 1
		}
	}
}

// LastBySubject returns the last message stored under subject in stream
// with one direct get ($JS.API.DIRECT.GET.<stream>.<subject>): a cheap
// existence check. The stream needs AllowDirect.
//
// ctx bounds the call (DefaultDirectGetTimeout when it has no deadline).
// It returns ErrNoMessages when no message is stored under subject,
// ErrDirectGet when the stream does not answer or answers with an error
// status, ErrInvalidOptions for an empty stream or subject, and the
// context's or the connection's error otherwise.
func LastBySubject(ctx context.Context, nc *nats.Conn, stream, subject string) (RawMsg, error) {
	if err := checkStreamSubject(stream, subject); err != nil {
		return RawMsg{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDirectGetTimeout)
		defer cancel()
	}
	m, err := nc.RequestWithContext(ctx, subjects.DirectGetLast(stream, subject), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return RawMsg{}, fmt.Errorf("%w: stream %s does not answer direct gets: %w", ErrDirectGet, stream, err)
	}
	if err != nil {
		return RawMsg{}, fmt.Errorf("direct get last %s %s: %w", stream, subject, err)
	}
	if ReplyStatus(m) != "" {
		return RawMsg{}, statusError(stream, subject, m)
	}
	return rawMsg(m)
}

// ReplyStatus is the status of a direct get's reply m: the server's status
// line (204 end of batch, 404 no message, 408, 503, …), "" for a stored
// message. nats.go reads a status line into the Status header, where a
// stored message's own Status header (a publisher's) lands too; a reply
// carrying a stored message always names its stream (Nats-Stream), a
// status reply never does. Reading Status alone made a stored message with
// Status: 204 end a batch, and one with Status: 404 an absence.
func ReplyStatus(m *nats.Msg) string {
	if m.Header == nil || m.Header.Get(subjects.HeaderStream) != "" {
		return ""
	}
	return m.Header.Get(statusHeader)
}

func checkStreamSubject(stream, subject string) error {
	if stream == "" || strings.ContainsAny(stream, ".*> \t\r\n") {
		return fmt.Errorf("%w: stream name %q", ErrInvalidOptions, stream)
	}
	if subject == "" || strings.ContainsAny(subject, " \t\r\n") {
		return fmt.Errorf("%w: subject %q", ErrInvalidOptions, subject)
	}
	return nil
}

func statusError(stream, subject string, m *nats.Msg) error {
	st, desc := m.Header.Get(statusHeader), m.Header.Get(descriptionHeader)
	switch st {
	case statusNotFound:
		return &noMessagesError{stream: stream, subject: subject}
	case statusNoResponder:
		return fmt.Errorf("%w: stream %s does not answer direct gets: %w", ErrDirectGet, stream, nats.ErrNoResponders)
	default:
		return fmt.Errorf("%w: %s %s: status %s %s", ErrDirectGet, stream, subject, st, desc)
	}
}

// noMessagesError is ErrNoMessages for one stream and subject: the answer
// to most existence checks (a request with no stored cancel, a stream with
// no frame yet), so it is one allocation, its message built only when read.
type noMessagesError struct{ stream, subject string }

func (e *noMessagesError) Error() string {
	return ErrNoMessages.Error() + ": " + e.stream + " " + e.subject
}

func (e *noMessagesError) Unwrap() error { return ErrNoMessages }

// directGetHeaders are added by the server to direct get replies.
var directGetHeaders = []string{
	subjects.HeaderStream, subjects.HeaderSubject, subjects.HeaderStreamSequence,
	subjects.HeaderTimeStamp, subjects.HeaderNumPending, subjects.HeaderLastSequence,
}

func rawMsg(m *nats.Msg) (RawMsg, error) {
	h := m.Header
	seq, err := strconv.ParseUint(h.Get(subjects.HeaderStreamSequence), 10, 64)
	if err != nil {
		return RawMsg{}, fmt.Errorf("%w: reply without a valid %s header", ErrDirectGet, subjects.HeaderStreamSequence)
	}
	rm := RawMsg{Subject: h.Get(subjects.HeaderSubject), Seq: seq, Data: m.Data}
	if ts := h.Get(subjects.HeaderTimeStamp); ts != "" {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			rm.Time = t
		}
	}
	for _, k := range directGetHeaders {
		delete(h, k)
	}
	if len(h) > 0 {
		rm.Header = h
	}
	return rm, nil
}

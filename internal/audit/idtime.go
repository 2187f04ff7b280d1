package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// DefaultClockMargin is how much earlier than the time in its id (or its
// envelope's timestamp) a request may have been stored by default: the
// clocks of the process that made the id and of the stream's leader
// differ (WithClockMargin).
const DefaultClockMargin = time.Minute

// nearClock is the window of the first search around an id's time: clocks
// kept in step by NTP differ by far less.
const nearClock = 2 * time.Second

// singleGets is how many messages seqFrom reads one direct get at a time
// before it asks for pages: a page's direct get makes the server count
// the subject's messages from the start sequence to the stream's end
// (Nats-Num-Pending), which on a long history loads the blocks in between,
// where a search from a time hint usually ends within a few messages.
const singleGets = 128

// copyLag bounds how long after the original E2A_AUDIT stores its copy
// (sourcing trails the hot streams, by milliseconds, by seconds under a
// burst): a search from an id's time gives up that long after the window.
const copyLag = time.Minute

// hintSince returns where a search for id in E2A_AUDIT may start: the
// time in a UUIDv7 id (egress.RequestIDTime: the ids the pipeline makes;
// a client's own request_id gives no hint) less margin when that is later
// than since.
// The audit's store times grow with its sequence, so a binary search
// (seqAtTime) turns the time into a sequence in log2(messages) direct
// gets: the id is the index, no subject or key per request is kept for it.
func hintSince(id string, since time.Time, margin time.Duration) (time.Time, bool) {
	t, ok := egress.RequestIDTime(id)
	if !ok {
		return since, false
	}
	t = t.Add(-margin)
	if !t.After(since) {
		return since, false
	}
	return t, true
}

// startTimeRequest is the body of a direct get by time: the first message
// of next_by_subj stored at or after start_time (nats-server 2.11+).
type startTimeRequest struct {
	StartTime  time.Time `json:"start_time"`
	NextBySubj string    `json:"next_by_subj"`
}

// seqFromTime asks the stream for the first message of filter stored at
// or after t in one direct get: the server finds the block by its time
// range in memory and reads that block alone, where a binary search of
// single-message gets loads a block per probe (on an S2-compressed
// E2A_AUDIT, a decompressed block each). It returns st.last+1 when no
// message is that recent, and false when the server does not answer such
// a get (the caller's binary search follows).
func (a *Auditor) seqFromTime(ctx context.Context, st streamState, filter string, t time.Time) (uint64, bool) {
	body, err := json.Marshal(startTimeRequest{StartTime: t.UTC(), NextBySubj: filter})
	if err != nil {
		return 0, false
	}
	var reply *nats.Msg
	err = a.call(ctx, func(c context.Context) error {
		var e error
		reply, e = a.nc.RequestWithContext(c, subjects.DirectGet(st.name), body)
		return e
	})
	if err != nil {
		return 0, false
	}
	switch streams.ReplyStatus(reply) {
	case "":
	case "404":
		return st.last + 1, true
	default:
		return 0, false
	}
	seq, err := strconv.ParseUint(reply.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || seq == 0 {
		return 0, false
	}
	return seq, true
}

// seqFrom iterates over the messages stored under subject in stream from
// sequence from on: the first singleGets one direct get each (no batch,
// so the server counts nothing), then a page at a time (seq).
func (a *Auditor) seqFrom(ctx context.Context, stream, subject string, from uint64) iter.Seq2[streams.RawMsg, error] {
	return func(yield func(streams.RawMsg, error) bool) {
		for range singleGets {
			m, ok, err := a.single(ctx, stream, subject, from)
			if err != nil {
				yield(streams.RawMsg{}, err)
				return
			}
			if !ok {
				return
			}
			if !yield(m, nil) {
				return
			}
			from = m.Seq + 1
		}
		for m, err := range a.seq(ctx, stream, subject, from) {
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

// singleRequest is the body of a direct get of one message: the first of
// next_by_subj at or after seq.
type singleRequest struct {
	Seq        uint64 `json:"seq"`
	NextBySubj string `json:"next_by_subj"`
}

// single reads the first message of subject in stream at or after
// sequence from; false when there is none.
func (a *Auditor) single(ctx context.Context, stream, subject string, from uint64) (streams.RawMsg, bool, error) {
	body, err := json.Marshal(singleRequest{Seq: max(from, 1), NextBySubj: subject})
	if err != nil {
		return streams.RawMsg{}, false, err
	}
	var reply *nats.Msg
	err = a.call(ctx, func(c context.Context) error {
		var e error
		reply, e = a.nc.RequestWithContext(c, subjects.DirectGet(stream), body)
		return e
	})
	if err != nil {
		return streams.RawMsg{}, false, err
	}
	switch st := streams.ReplyStatus(reply); st {
	case "":
	case "404":
		return streams.RawMsg{}, false, nil
	default:
		return streams.RawMsg{}, false, fmt.Errorf("%w: %s %s: %s %s", streams.ErrDirectGet, stream, subject, st, reply.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(reply.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return streams.RawMsg{}, false, fmt.Errorf("%w: %s %s: no sequence", streams.ErrDirectGet, stream, subject)
	}
	ts, _ := time.Parse(time.RFC3339Nano, reply.Header.Get(jetstream.TimeStampHeaer))
	m := streams.RawMsg{Subject: reply.Header.Get(jetstream.SubjectHeader), Seq: seq, Time: ts, Data: reply.Data}
	for _, k := range []string{jetstream.StreamHeader, jetstream.SequenceHeader, jetstream.TimeStampHeaer, jetstream.SubjectHeader, "Nats-Num-Pending", "Nats-Last-Sequence"} {
		reply.Header.Del(k)
	}
	if len(reply.Header) > 0 {
		m.Header = reply.Header
	}
	return m, true, nil
}

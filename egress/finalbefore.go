package egress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// openRequestsCached bounds the cache of requests known not to have ended
// up to a stored message (Service.unended): one entry per request, cleared
// whole when full.
const openRequestsCached = 10000

// openRequests remembers, per request, the stream sequence of a stored
// message up to which no message of the request holds a final frame. A
// request's stored messages never change (the oldest age out), so what
// was read once stays true: a poll of a running request reads no frame
// before its last again.
type openRequests struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (o *openRequests) get(id string) (uint64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.m[id]
	return v, ok
}

func (o *openRequests) put(id string, upTo uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= openRequestsCached {
		o.m = make(map[string]uint64)
	}
	o.m[id] = upTo // a lower one than known only costs a read again
}

// predecessor is where the message hdr belongs to was fenced: the stream
// sequence of the message stored before it under its subject, which the
// server checked as it stored it (Nats-Expected-Last-Subject-Sequence, 0:
// the first). ok is false for a message published without it (by hand).
func predecessor(hdr nats.Header) (seq uint64, ok bool) {
	v := hdr.Get(jetstream.ExpectedLastSubjSeqHeader)
	if v == "" || hdr.Get(jetstream.ExpectedLastSubjSeqSubjHeader) != "" {
		return 0, false
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	return seq, err == nil
}

// endOf is last, the last stored frame of request id, or, when that is not
// final, the final frame stored before it: a request whose final frame is
// stored has ended, whatever was stored after it (by hand, by a rogue
// writer), and every view says so. The frames before last are read only
// when neither the fence of last's message (its predecessor: none, or one
// already known not to end the request) nor the cache (s.unended) tells: a
// running request's poll reads nothing more, the first read of one whose
// last message follows others reads them once.
func (s *Service) endOf(ctx context.Context, id string, last *lastInfo) (*lastInfo, error) {
	if last == nil || last.final {
		return last, nil
	}
	start := uint64(0)
	// A sequence known past the request's last message is of a stream
	// made again since (its sequences start over): it tells nothing. (One
	// below it by chance, in a stream made again that holds stray frames
	// after a final one, is taken as of this stream: not covered.)
	if known, ok := s.unended.get(id); ok && known <= last.streamSeq {
		if known == last.streamSeq || (last.fenced && last.prev == known) {
			s.unended.put(id, last.streamSeq)
			return last, nil
		}
		start = known + 1
	} else if last.fenced && last.prev == 0 {
		s.unended.put(id, last.streamSeq) // the request's first message
		return last, nil
	}
	f, reached, err := s.finalBetween(ctx, id, start, last.streamSeq)
	switch {
	case err != nil:
		return nil, err
	case f != nil:
		return f, nil
	case reached:
		s.unended.put(id, last.streamSeq)
	}
	return last, nil
}

// errStopRead ends finalBetween's read: a final frame found, or upTo passed.
var errStopRead = errors.New("egress: final frame found")

// finalBetween reads the stored messages of request id from stream
// sequence start up to upTo and returns the first final frame among them
// (nil when none); reached tells that the read got to upTo (a replica that
// lags may end it earlier).
func (s *Service) finalBetween(ctx context.Context, id string, start, upTo uint64) (f *lastInfo, reached bool, err error) {
	subj, err := responseSubject(id)
	if err != nil {
		return nil, false, nil
	}
	var head render.Head
	read := start
	for !reached && f == nil {
		pending, err := s.mux.GetBatch(ctx, s.streamNames().responses, subj, read, DefaultBatch, DefaultBatchBytes, func(seq uint64, h nats.Header, data []byte) error {
			read = seq + 1
			if seq > upTo {
				reached = true
				return errStopRead // past: nothing more to read
			}
			reached = seq == upTo
			for rest := data; len(rest) > 0; {
				var frame []byte
				frame, rest = e2a.NextInBurst(rest)
				if head.Decode(frame) == nil && head.IsFinal {
					f = &lastInfo{streamSeq: seq, seq: head.Sequence, final: true, raw: frame, stamp: h.Get(subjects.HeaderTimeStamp)}
					return errStopRead
				}
			}
			return nil
		})
		switch {
		case errors.Is(err, errStopRead):
		case err != nil:
			return nil, false, fmt.Errorf("egress: read the frames of %q: %w", id, err)
		case pending == 0:
			return f, reached, nil
		}
	}
	return f, reached, nil
}

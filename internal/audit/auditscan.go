package audit

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// maxEarlyFrames bounds the response messages (frames or bursts) scanAudit
// keeps for requests it has not met yet (sourcing may store a frame before
// its request).
const maxEarlyFrames = 10000

// auditScan is the state of one scanAudit. What it holds is bounded by the
// requests in flight, not by the history it reads: a request's messages
// from its envelope to its final frame, then reported and dropped.
type auditScan struct {
	rc       *replayCtx
	end      time.Time
	hotFirst uint64
	done     map[string]bool
	// open holds the requests met whose final frame is not read yet, with
	// their messages; met counts the requests met (found.n: the ones still
	// open at the end are reported in that order; the limit counts them).
	open map[string]*found
	met  int
	// finished remembers the last window requests reported (finishedQ, in
	// the order they finished), so that a message of one stored after its
	// final frame is reported (replayCtx.reportLate).
	finished  map[string]*finishedReq
	finishedQ []string
	window    int
	// early holds up to maxEarlyFrames messages of requests not met yet;
	// earlyIDs their ids, one per message, in the order read (and a few of
	// messages claimed since: compactEarly).
	early     map[string][]*storedMsg
	earlyIDs  []string
	earlyN    int
	acceptNew bool
	// The most it held at once (Auditor.scanPeak).
	peakOpen, peakFinished, peakEarly int
}

// finishedReq is what auditScan remembers of a reported request.
type finishedReq struct {
	pool         string
	requestFound bool
	check        *checker
}

// scanAudit reads E2A_AUDIT once from the query's Since: requests stored up
// to end that match (and, with hotFirst, copies of requests stored before
// E2A_REQUESTS' sequence hotFirst), and their frames, which may lie after
// end. Each request is reported once its final frame is read, so requests
// come in the order they finished (the records of one request together,
// in stream order); those still without a final frame at the end of what
// it reads come last, in the order their envelopes were met. A message of
// a request stored after its final frame is reported with a further
// summary of the request (the message's frames and every violation found,
// this one included) while fewer than defaultMaxTracked requests have
// finished since its request did; after that the scan no longer knows the
// request and does not report the message (replay the request by id while
// the hot streams hold it to see it).
func (a *Auditor) scanAudit(ctx context.Context, rc *replayCtx, end time.Time, hotFirst uint64, done map[string]bool) error {
	from, err := a.seqAtTime(ctx, rc.audit, subjects.AllAudit, rc.q.Since)
	if err != nil {
		return err
	}
	s := &auditScan{rc: rc, end: end, hotFirst: hotFirst, done: done, open: map[string]*found{},
		finished: map[string]*finishedReq{}, window: cmp.Or(a.scanWindow, defaultMaxTracked),
		early: map[string][]*storedMsg{}, acceptNew: true}
	if a.scanPeak != nil {
		defer func() { a.scanPeak(s.peakOpen, s.peakFinished, s.peakEarly) }()
	}
	for m, err := range a.auditSeq(ctx, rc.audit, subjects.AllAudit, from, a.seq) {
		if rc.keepLost(err) {
			continue // the messages after the corrupt batch follow
		}
		if err != nil {
			return err
		}
		if err := s.add(auditMsg(rc.audit.name, m)); err != nil {
			return err
		}
		if !s.acceptNew && len(s.open) == 0 {
			break
		}
	}
	open := slices.SortedFunc(maps.Values(s.open), func(x, y *found) int { return cmp.Compare(x.n, y.n) })
	for _, f := range open {
		if err := rc.report(f); err != nil {
			return err
		}
	}
	return nil
}

// add reads one message of E2A_AUDIT.
func (s *auditScan) add(sm *storedMsg) error {
	p, err := subjects.Parse(sm.subject)
	if err != nil {
		return nil
	}
	switch p.Kind {
	case subjects.KindRequest:
		return s.request(sm, p.RequestID, p.Agent)
	case subjects.KindResponse:
		return s.response(sm, p.RequestID)
	}
	return nil
}

// request reads the envelope sm of request id of pool.
func (s *auditScan) request(sm *storedMsg, id, pool string) error {
	if !s.acceptNew {
		return nil
	}
	if pastAuditRange(sm, s.end, s.hotFirst) {
		s.acceptNew = false
		return nil
	}
	if s.done[id] || s.open[id] != nil || s.finished[id] != nil {
		return nil
	}
	env, _ := e2a.FromJSON(sm.data)
	if !s.rc.q.match(pool, env) {
		return nil
	}
	f := &found{id: id, pool: pool, req: sm, frames: s.early[id], n: s.met}
	s.met++
	s.earlyN -= len(f.frames)
	delete(s.early, id)
	s.compactEarly()
	if q := s.rc.q; q.Limit > 0 && len(s.done)+s.met >= q.Limit {
		s.acceptNew = false
	}
	if slices.ContainsFunc(f.frames, isFinal) {
		return s.finish(f)
	}
	s.open[id] = f
	s.peakOpen = max(s.peakOpen, len(s.open))
	return nil
}

// response reads the response message sm (a frame or a burst) of request
// id.
func (s *auditScan) response(sm *storedMsg, id string) error {
	if f := s.open[id]; f != nil {
		f.frames = append(f.frames, sm)
		if !isFinal(sm) {
			return nil
		}
		delete(s.open, id)
		return s.finish(f)
	}
	if fin := s.finished[id]; fin != nil {
		return s.rc.reportLate(id, fin, sm)
	}
	if s.acceptNew {
		s.addEarly(id, sm)
	}
	return nil
}

// finish reports f, whose final frame was read, drops its messages, and
// remembers it among the last window finished.
func (s *auditScan) finish(f *found) error {
	c, err := s.rc.reportChecked(f)
	if err != nil {
		return err
	}
	s.finished[f.id] = &finishedReq{pool: f.pool, requestFound: f.req != nil, check: c}
	s.finishedQ = append(s.finishedQ, f.id)
	for len(s.finishedQ) > s.window {
		delete(s.finished, s.finishedQ[0])
		s.finishedQ = s.finishedQ[1:]
	}
	s.peakFinished = max(s.peakFinished, len(s.finished))
	return nil
}

// addEarly keeps sm, a message of request id not met yet, forgetting the
// oldest such messages beyond maxEarlyFrames.
func (s *auditScan) addEarly(id string, sm *storedMsg) {
	s.early[id] = append(s.early[id], sm)
	s.earlyIDs = append(s.earlyIDs, id)
	s.earlyN++
	for s.earlyN > maxEarlyFrames && len(s.earlyIDs) > 0 {
		old := s.earlyIDs[0]
		s.earlyIDs = s.earlyIDs[1:]
		if fr := s.early[old]; len(fr) > 0 {
			s.early[old] = fr[1:]
			s.earlyN--
			if len(s.early[old]) == 0 {
				delete(s.early, old)
			}
		}
	}
	s.peakEarly = max(s.peakEarly, len(s.earlyIDs))
}

// compactEarly drops from earlyIDs the ids of messages claimed by their
// request since, once they outnumber the messages still kept (and a few):
// it kept one id per early message of the whole history.
func (s *auditScan) compactEarly() {
	if len(s.earlyIDs) <= 2*s.earlyN+16 {
		return
	}
	left := make(map[string]int, len(s.early))
	for id, fr := range s.early {
		left[id] = len(fr)
	}
	kept := make([]string, 0, s.earlyN)
	for _, id := range slices.Backward(s.earlyIDs) {
		if left[id] > 0 {
			left[id]--
			kept = append(kept, id)
		}
	}
	slices.Reverse(kept)
	s.earlyIDs = kept
}

package a2abridge

import (
	"encoding/json"
	"hash/fnv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// A continuation's baseline: what the upstream task held when the turn
// began (its earlier turns' answers, read with GetTask), recorded with
// the request's upstream task (bridge.Thread.Baseline, one write) so
// that a worker taking the turn over writes only what the task got
// beyond it, however many turns the task had: the thread keeps only its
// last bridge.MaxThreadTurns requests, whose stored frames hold only
// those turns' answers. Per artifact, in the task's order, the length
// and hash of its text of each kind (not the text: the record stays
// small) and the count of its other parts; the artifacts past
// bridge.MaxBaseline bytes are left out (more), their earlier answers
// read, as a record without a baseline, from the stored frames of the
// thread's earlier turns. With them the interrupted status the turn found
// the task in (its state, question's id and timestamp: turn.asked), so
// that the worker taking the turn over does not take the task still
// showing it for the turn's end either (stillAsking).

// baseline is a thread's baseline as the bridge encodes it.
type baseline struct {
	Artifacts []baseArtifact `json:"a,omitempty"`
	More      bool           `json:"more,omitempty"`
	Asked     *baseStatus    `json:"q,omitempty"`
}

// baseStatus is what stillAsking compares of an interrupted status.
type baseStatus struct {
	State     a2a.TaskState `json:"s"`
	MessageID string        `json:"m,omitempty"`
	Message   bool          `json:"h,omitempty"` // a message, with an id or without
	Timestamp *time.Time    `json:"t,omitempty"`
}

// baseStatusOf is st as a baseline records it (nil for nil).
func baseStatusOf(st *a2a.TaskStatus) *baseStatus {
	if st == nil {
		return nil
	}
	b := &baseStatus{State: st.State, Message: st.Message != nil, Timestamp: st.Timestamp}
	if st.Message != nil {
		b.MessageID = st.Message.ID
	}
	return b
}

// status is the interrupted status b records, as stillAsking reads it
// (nil for nil).
func (b *baseStatus) status() *a2a.TaskStatus {
	if b == nil {
		return nil
	}
	st := &a2a.TaskStatus{State: b.State, Timestamp: b.Timestamp}
	if b.Message {
		st.Message = &a2a.Message{ID: b.MessageID}
	}
	return st
}

// baseArtifact is what one artifact held.
type baseArtifact struct {
	ID     a2a.ArtifactID      `json:"id"`
	Text   map[string]baseText `json:"t,omitempty"` // by delta kind
	Others int                 `json:"o,omitempty"`
	Native bool                `json:"n,omitempty"`
}

// baseText is a text's length and FNV-1a hash.
type baseText [2]uint64

func baseTextOf(s string) baseText {
	h := fnv.New64a()
	h.Write([]byte(s))
	return baseText{uint64(len(s)), h.Sum64()}
}

// baselineOf encodes the baseline of task, whose artifacts base recorded
// in seen, and the status asked, within bridge.MaxBaseline bytes.
func (t *turn) baselineOf(task *a2a.Task, asked *a2a.TaskStatus) []byte {
	b := baseline{Asked: baseStatusOf(asked)}
	q, _ := json.Marshal(b.Asked)
	size, done := 64+len(q), map[a2a.ArtifactID]bool{}
	for _, a := range task.Artifacts {
		if a == nil {
			continue
		}
		w := t.seen[a.ID]
		if w == nil || done[a.ID] {
			continue
		}
		done[a.ID] = true
		ba := baseArtifact{ID: a.ID, Others: w.others, Native: w.native}
		for kind, s := range w.text {
			if ba.Text == nil {
				ba.Text = map[string]baseText{}
			}
			ba.Text[kind] = baseTextOf(s)
		}
		enc, _ := json.Marshal(ba)
		if size += len(enc) + 1; size > bridge.MaxBaseline {
			b.More = true
			break
		}
		b.Artifacts = append(b.Artifacts, ba)
	}
	enc, _ := json.Marshal(b)
	return enc
}

// readBaseline reads a thread's baseline (ok false when there is none,
// or it cannot be read).
func readBaseline(data []byte) (b baseline, ok bool) {
	if data == nil || json.Unmarshal(data, &b) != nil {
		return baseline{}, false
	}
	return b, true
}

// seedBaseline records baseline b as what the frames hold of its
// artifacts (in place of what earlier turns' stored frames said), their
// text pending until the first task snapshot (resolveBaseline).
func (t *turn) seedBaseline(b baseline) {
	for _, ba := range b.Artifacts {
		w := &written{text: map[string]string{}, others: ba.Others, any: true, native: ba.Native}
		if len(ba.Text) > 0 {
			w.base, t.pending = ba.Text, true
		}
		t.seenOf(ba.ID)
		t.seen[ba.ID] = w
	}
}

// resolveBaseline makes the text of each artifact of the baseline the
// start of its text in task, a snapshot: the text task holds of that
// length and hash, what the frames already hold written after it; an
// artifact whose text does not start so was replaced since (stale: it
// is written whole).
func (t *turn) resolveBaseline(task *a2a.Task) {
	t.pending = false
	now := make(map[a2a.ArtifactID]contents, len(task.Artifacts))
	for _, a := range task.Artifacts {
		if a != nil {
			now[a.ID] = contentsOf(a)
		}
	}
	for id, w := range t.seen {
		if w.base == nil {
			continue
		}
		c, ok := now[id]
		for kind, bt := range w.base {
			s := c.full[kind]
			if ok && uint64(len(s)) >= bt[0] && baseTextOf(s[:bt[0]]) == bt {
				w.text[kind] = s[:bt[0]] + w.text[kind]
			} else if ok {
				w.stale = true
			}
		}
		w.base = nil
	}
}

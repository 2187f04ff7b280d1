package a2abridge

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// An agent may follow a subscription's task with the running turn's
// events again from its start instead of sending the artifacts it
// streamed so far in the task (another E2A pipeline's A2A door does:
// the task without the turn's artifacts, then the turn's events from its
// first frame, so that the updates build the whole answer). Its first
// update of an artifact the frames hold comes without append and holds
// less than was written: written whole (replace), it repeated the answer
// to E2A and ACP clients. Such an update starts a replay instead: the
// artifact as the agent sends it again is rebuilt (turn.replay) and
// nothing is written while it stays within what the frames hold; once it
// goes beyond, what it has past them is written (snapshot), or, when it
// no longer matches them, it is written whole (rewrite). A replay still
// open when the turn ends (an agent that truly cut its artifact short) is
// written whole then (endReplays).

// replayStart reports whether a, an update without append of an artifact
// the frames hold, repeats part of what they hold: then it starts the
// artifact's replay, and nothing is written.
func (t *turn) replayStart(a *a2a.Artifact) bool {
	w := t.seen[a.ID]
	if w == nil || w.stale || !contentsOf(a).within(w) {
		return false
	}
	if t.replay == nil {
		t.replay = map[a2a.ArtifactID]*a2a.Artifact{}
	}
	t.replay[a.ID] = a2amap.UpdatedArtifact(nil, a, false)
	return true
}

// replaying adds e, an update of an artifact in replay, to the artifact
// as the agent sends it again (a2amap.UpdatedArtifact, as A2A applies an
// update; an appended update's name and description, when it has them,
// become the artifact's too), and writes what it has beyond the frames
// once it goes beyond them (the replay then ends).
func (t *turn) replaying(r *a2a.Artifact, e *a2a.TaskArtifactUpdateEvent) error {
	r = a2amap.UpdatedArtifact(r, e.Artifact, e.Append)
	if e.Append {
		r.Name = cmp.Or(e.Artifact.Name, r.Name)
		r.Description = cmp.Or(e.Artifact.Description, r.Description)
	}
	t.replay[r.ID] = r
	c, w := contentsOf(r), t.seenOf(r.ID)
	if c.within(w) {
		return nil
	}
	delete(t.replay, r.ID)
	if c.extends(w) {
		return t.snapshot(r)
	}
	return t.rewrite(r)
}

// endReplays writes whole each artifact still in replay whose content is
// not what the frames hold (the agent replaced it with less), before the
// turn's end; a task snapshot ends the replays too (it shows each
// artifact whole).
func (t *turn) endReplays() error {
	replay := t.replay
	t.replay = nil
	for _, id := range slices.Sorted(maps.Keys(replay)) { // in one order, run to run
		r := replay[id]
		if c, w := contentsOf(r), t.seenOf(r.ID); c.within(w) && c.extends(w) {
			continue // all the frames hold, no more
		}
		if err := t.rewrite(r); err != nil {
			return err
		}
	}
	return nil
}

// within reports whether w holds what c does, and maybe more: the text of
// each kind as the start of what was written, no more other parts.
func (c contents) within(w *written) bool {
	if w.stale {
		return false
	}
	for kind, s := range c.full {
		if !strings.HasPrefix(w.text[kind], s) {
			return false
		}
	}
	return len(c.others) <= w.others
}

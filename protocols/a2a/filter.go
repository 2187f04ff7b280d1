package a2a

import (
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// partFilter returns the parts the client of p must not get (nil: all
// are sent): a2amap.HiddenPart.
func partFilter(p a2amap.Params) func(*a2a.Part) bool { return a2amap.HiddenPart(p) }

// withoutParts returns parts without those drop reports.
func withoutParts(parts a2a.ContentParts, drop func(*a2a.Part) bool) a2a.ContentParts {
	var out a2a.ContentParts
	for _, p := range parts {
		if !drop(p) {
			out = append(out, p)
		}
	}
	return out
}

// msgWithout returns m without the parts drop reports, nil when none is
// left.
func msgWithout(m *a2a.Message, drop func(*a2a.Part) bool) *a2a.Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Parts = withoutParts(m.Parts, drop)
	if len(c.Parts) == 0 {
		return nil
	}
	return &c
}

// EventFilter returns the filter of the client of p: an event without the
// parts that client must not get (partFilter: DataParts unless its output
// modes admit JSON, the interaction spec's parts unless it declared the
// extension), and false when nothing of it is left to send. Build it once
// per answer. Package a2av1 filters A2A v1.0's answers with it.
func EventFilter(p a2amap.Params) func(a2a.Event) (a2a.Event, bool) {
	drop := partFilter(p)
	if drop == nil {
		return func(ev a2a.Event) (a2a.Event, bool) { return ev, true }
	}
	return func(ev a2a.Event) (a2a.Event, bool) {
		e, ok := dropParts(ev, drop)
		if !ok {
			return nil, false
		}
		return e.(a2a.Event), true
	}
}

// FilterEvents filters a frame's events for the client of p (EventFilter),
// dropping those left empty; evs itself when that client gets every part.
func FilterEvents(p a2amap.Params, evs []a2a.Event) []a2a.Event {
	drop := partFilter(p)
	if drop == nil {
		return evs
	}
	var kept []a2a.Event
	for _, ev := range evs {
		if e, ok := dropParts(ev, drop); ok {
			kept = append(kept, e.(a2a.Event))
		}
	}
	return kept
}

// dropParts returns ev without the parts drop reports, and false when
// nothing of the event is left to send.
func dropParts(ev any, drop func(*a2a.Part) bool) (any, bool) {
	withoutData := func(parts a2a.ContentParts) a2a.ContentParts { return withoutParts(parts, drop) }
	msgWithoutData := func(m *a2a.Message) *a2a.Message { return msgWithout(m, drop) }
	switch e := ev.(type) {
	case *a2a.Message:
		m := msgWithoutData(e)
		return m, m != nil
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact == nil {
			return e, true
		}
		c, a := *e, *e.Artifact
		a.Parts = withoutData(a.Parts)
		if len(a.Parts) == 0 && !e.LastChunk {
			return nil, false
		}
		c.Artifact = &a
		return &c, true
	case *a2a.TaskStatusUpdateEvent:
		if e.Status.Message == nil {
			return e, true // no part to drop
		}
		c := *e
		c.Status.Message = msgWithoutData(e.Status.Message)
		return &c, true
	case *a2a.Task:
		c := *e
		c.Status.Message = msgWithoutData(e.Status.Message)
		c.History = nil
		for _, m := range e.History {
			if m2 := msgWithoutData(m); m2 != nil {
				c.History = append(c.History, m2)
			}
		}
		c.Artifacts = nil
		for _, a := range e.Artifacts {
			if a == nil { // a stored task's "artifacts":[null]: nothing to send
				continue
			}
			ac := *a
			if ac.Parts = withoutData(a.Parts); len(ac.Parts) > 0 {
				c.Artifacts = append(c.Artifacts, &ac)
			}
		}
		return &c, true
	}
	return ev, true
}

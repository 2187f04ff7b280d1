package a2a

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// acceptsData reports whether output modes modes admit DataParts.
func acceptsData(modes []string) bool {
	if len(modes) == 0 {
		return true
	}
	for _, m := range modes {
		if i := strings.IndexByte(m, ';'); i >= 0 {
			m = m[:i]
		}
		m = strings.ToLower(strings.TrimSpace(m))
		if m == "application/json" || m == "*/*" || m == "application/*" || strings.HasSuffix(m, "+json") {
			return true
		}
	}
	return false
}

// isData reports a data part.
func isData(p *a2a.Part) bool {
	_, ok := p.Content.(a2a.Data)
	return ok
}

// isInteraction reports a part only trpc interaction-spec clients get: a
// thought text part, a function_call or function_response data part.
func isInteraction(p *a2a.Part) bool {
	switch p.Content.(type) {
	case a2a.Text:
		return p.Metadata[a2amap.MetaThought] == true
	case a2a.Data:
		typ, _ := p.Metadata[a2amap.MetaPartType].(string)
		return typ == e2a.ToolFunctionCall || typ == e2a.ToolFunctionResponse
	}
	return false
}

// partFilter returns the parts the client of p must not get (nil: all
// are sent): DataParts unless its output modes admit JSON,
// interaction-spec parts unless it declared the extension.
func partFilter(p a2amap.Params) func(*a2a.Part) bool {
	data, basic := !acceptsData(p.AcceptedOutputModes), !p.Interaction
	if !data && !basic {
		return nil
	}
	return func(pt *a2a.Part) bool { return (data && isData(pt)) || (basic && isInteraction(pt)) }
}

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

package a2amap

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// HiddenPart returns what the client of p must not get (nil: every part is
// sent): DataParts unless its output modes admit JSON, the trpc
// interaction spec's parts (thought text, function_call,
// function_response, executable_code and code_execution_result data)
// unless it declared the extension. Package a2a's
// event filters drop them; a stream mapper (NewStreamMapper) starts an
// artifact with the first update its client gets of it.
func HiddenPart(p Params) func(*a2a.Part) bool {
	data, basic := !acceptsData(p.AcceptedOutputModes), !p.Interaction
	if !data && !basic {
		return nil
	}
	return func(pt *a2a.Part) bool { return (data && isData(pt)) || (basic && isInteraction(pt)) }
}

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
// thought text part, a function_call, function_response, executable_code
// or code_execution_result data part (the spec's execution trace, which
// A2A leaves out of its scope).
func isInteraction(p *a2a.Part) bool {
	switch p.Content.(type) {
	case a2a.Text:
		return p.Metadata[MetaThought] == true
	case a2a.Data:
		switch typ, _ := p.Metadata[MetaPartType].(string); typ {
		case e2a.ToolFunctionCall, e2a.ToolFunctionResponse, PartExecutableCode, PartCodeExecutionResult:
			return true
		}
	}
	return false
}

// shown reports whether the mapper's client gets any of parts (Mapper.hidden).
func (m *Mapper) shown(parts a2a.ContentParts) bool {
	if m.hidden == nil {
		return true
	}
	for _, p := range parts {
		if !m.hidden(p) {
			return true
		}
	}
	return false
}

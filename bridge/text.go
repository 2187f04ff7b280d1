package bridge

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// UserText is the user's text of a request, whatever its front door:
// params.text (A2A text parts, joined), params.content or params.query
// (E2A), or the blocks of params.prompt (ACP), else of params.content_blocks
// (E2A's multimodal request, spec §4.4: Envelope.PromptBlocks; a block
// marked a thought, _meta.thought, left out as params.text leaves out A2A
// thought parts), joined by line feeds: text
// blocks as they are, an embedded resource (the file an editor attaches)
// as its text in <context ref="URI"> … </context> (a "</context" in the
// file or its URI quoted, so the file cannot end the wrapper; a binary one
// named only), a resource link as [name](URI): an upstream that takes text gets
// what the user attached.
func UserText(env *e2a.Envelope) string {
	for _, k := range []string{"text", "content", "query"} {
		if s := env.ParamString(k); s != "" {
			return s
		}
	}
	var texts []string
	for _, b := range env.PromptBlocks() {
		m, _ := b.(map[string]any)
		if meta, _ := m["_meta"].(map[string]any); meta["thought"] == true {
			continue
		}
		if s := promptBlockText(m); s != "" {
			texts = append(texts, s)
		}
	}
	return strings.Join(texts, "\n")
}

// closeTag is what in an attached file's text (or its URI) would close its
// <context> wrapper early ("</context", any case or spacing), so that
// the rest of the file would read as the user's own words: UserText
// writes it "<\/context", which no reader takes for the wrapper's end.
var closeTag = regexp.MustCompile(`(?i)</(\s*context)`)

// quoteClose writes s with closeTag quoted.
func quoteClose(s string) string { return closeTag.ReplaceAllString(s, `<\/$1`) }

// promptBlockText is the text of an ACP content block for UserText.
func promptBlockText(m map[string]any) string {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	switch m["type"] {
	case "text":
		return str(m, "text")
	case "resource":
		r, _ := m["resource"].(map[string]any)
		uri := quoteClose(str(r, "uri"))
		if text, ok := r["text"].(string); ok {
			return fmt.Sprintf("<context ref=%q>\n%s\n</context>", uri, quoteClose(text))
		}
		if uri != "" {
			return fmt.Sprintf("[attached %s, %s: binary, not included]", uri, cmp.Or(str(r, "mimeType"), "unknown type"))
		}
	case "resource_link":
		if uri := str(m, "uri"); uri != "" {
			return "[" + cmp.Or(str(m, "name"), uri) + "](" + uri + ")"
		}
	}
	return ""
}

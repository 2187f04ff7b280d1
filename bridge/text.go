package bridge

import (
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// UserText is the user's text of a request, whatever its front door:
// params.text (A2A text parts, joined), params.content or params.query
// (E2A), or the text blocks of params.prompt (ACP), joined by line feeds.
func UserText(env *e2a.Envelope) string {
	for _, k := range []string{"text", "content", "query"} {
		if s := env.ParamString(k); s != "" {
			return s
		}
	}
	blocks, _ := env.Params["prompt"].([]any)
	var texts []string
	for _, b := range blocks {
		if m, ok := b.(map[string]any); ok && m["type"] == "text" {
			if s, ok := m["text"].(string); ok && s != "" {
				texts = append(texts, s)
			}
		}
	}
	return strings.Join(texts, "\n")
}

package a2amap

import (
	"strings"

	legacy "github.com/a2aproject/a2a-go/a2a"
)

// legacyText is the text of a v0.3 message's text parts, joined ("" for
// nil).
func legacyText(msg *legacy.Message) string {
	if msg == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range msg.Parts {
		if tp, ok := p.(legacy.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

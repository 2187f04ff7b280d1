package a2amap

import (
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
)

// messageText is the text of msg's text parts, joined ("" for nil).
func messageText(msg *a2a.Message) string {
	if msg == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range msg.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

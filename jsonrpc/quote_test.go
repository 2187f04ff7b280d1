package jsonrpc

import (
	"strings"
	"testing"
)

// TestQuoteForMessageKeepsRunes: QuoteForMessage cut at byte 128, in the
// middle of a multi-byte character, so the client's own (valid UTF-8)
// method name came back with Go \x escapes of half a character.
func TestQuoteForMessageKeepsRunes(t *testing.T) {
	name := strings.Repeat("a", 127) + "é-method"
	msg := MethodNotFound(name).Message
	if strings.Contains(msg, `\x`) || !strings.Contains(msg, strings.Repeat("a", 127)+"…") {
		t.Errorf("MethodNotFound of a valid UTF-8 name: %s", msg[len(msg)-20:])
	}
}

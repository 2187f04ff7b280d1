package ingress

import (
	"strings"
	"testing"
)

// TestOverlongID: the id of a line over the limit is read from the start
// kept of it when it comes before any member cut off there, and is null
// (nil) otherwise.
func TestOverlongID(t *testing.T) {
	big := strings.Repeat("A", 100)
	for _, c := range []struct{ start, want string }{
		{`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"prompt":[{"type":"image","data":"` + big, `7`},
		{`{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"x":"` + big, `"p-1"`},
		{`{"method":"m","params":{"nested":{"a":[1,2]}},"id":3,"x":"` + big, `3`},
		{`{"jsonrpc":"2.0","params":{"data":"` + big, ``},              // cut off before the id
		{`{"jsonrpc":"2.0","id":"trunc` + big, ``},                     // the id itself cut off
		{`{"jsonrpc":"2.0","id":{"a":1},"params":"` + big, ``},         // not a JSON-RPC id
		{`[{"jsonrpc":"2.0","id":1,"method":"m","params":"` + big, ``}, // a batch
		{`not json` + big, ``},
	} {
		if got := string(overlongID([]byte(c.start))); got != c.want {
			t.Errorf("overlongID(%.50s…) = %q, want %q", c.start, got, c.want)
		}
	}
}

package httpagent

import (
	"bytes"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestTextCharsets: a text/plain answer in ISO-8859-1 (a Java servlet's
// getWriter() default) is decoded; in UTF-8 or US-ASCII it is as sent.
func TestTextCharsets(t *testing.T) {
	for _, c := range []struct{ ct, body, want string }{
		{"text/plain; charset=ISO-8859-1", "caf\xe9 \xbd\r\n", `{"result":"café ½"}`},
		{"text/plain; charset=latin1", "na\xefve", `{"result":"naïve"}`},
		{"text/plain; charset=utf-8", "café", `{"result":"café"}`},
		{"text/plain; charset=us-ascii", "plain", `{"result":"plain"}`},
	} {
		w := &agenttest.Writer{}
		if err := fuzzCall(w).text(bytes.NewReader([]byte(c.body)), c.ct); err != nil {
			t.Fatalf("%s: %v", c.ct, err)
		}
		if f := w.Frames(); len(f) != 1 || string(f[0].Body) != c.want {
			t.Errorf("%s %q: frames %v, want one with %s", c.ct, c.body, f, c.want)
		}
	}
}

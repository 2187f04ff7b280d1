package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// FuzzStdio: whatever lines an editor writes to `e2a acp` before closing
// its stdin, ServeACPStdio answers and returns nil once every request in
// flight is answered (no hang), and every line it writes is one JSON-RPC
// 2.0 message or a batch of them.
func FuzzStdio(f *testing.F) {
	srv, _ := stdioPipeline(f, nil, ingress.WithMaxBodyBytes(4<<10))
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}` + "\n",
		`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}` + "\n" +
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}` + "\n" +
			`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}` + "\n",
		`[{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}},{"jsonrpc":"2.0","id":5,"method":"nope"}]` + "\n",
		`{"jsonrpc":"2.0","id":6,"method":"initialize"` + "\n" + `not json` + "\n\n" + `{"jsonrpc":"2.0","id":7}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"ask:input the weather"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out testkit.Buffer
		err := ingress.ServeACPStdio(ctx, bytes.NewReader(in), &out, srv)
		if ctx.Err() != nil {
			t.Fatalf("%q: still serving after 30 s", in)
		}
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace([]byte(out.String())), []byte{'\n'}) {
			if len(line) > 0 && !jsonRPCMessage(line) {
				t.Fatalf("%q: a line that is not a JSON-RPC message: %s", in, line)
			}
		}
	})
}

// jsonRPCMessage reports whether line is a JSON-RPC 2.0 message or a
// batch of them.
func jsonRPCMessage(line []byte) bool {
	type msg struct {
		JSONRPC string `json:"jsonrpc"`
	}
	var batch []msg
	if json.Unmarshal(line, &batch) == nil {
		for _, m := range batch {
			if m.JSONRPC != "2.0" {
				return false
			}
		}
		return len(batch) > 0
	}
	var m msg
	return json.Unmarshal(line, &m) == nil && m.JSONRPC == "2.0"
}

package ingress_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestACPShapesGolden pins the wire answers issue 16 corrected: the
// LoadSessionResponse object ending session/load (was null) and the -32601
// of session/set_mode when no modes are advertised (was the agent's reply).
func TestACPShapesGolden(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	var got bytes.Buffer
	for _, c := range []struct{ name, body string }{
		{"session/load of a session without turns",
			`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"` + sid + `","cwd":"/w","mcpServers":[]}}`},
		{"session/set_mode", `{"jsonrpc":"2.0","id":5,"method":"session/set_mode","params":{"sessionId":"` + sid + `","modeId":"code"}}`},
		{"session/set_model", `{"jsonrpc":"2.0","id":6,"method":"session/set_model","params":{"sessionId":"` + sid + `","modelId":"m"}}`},
	} {
		resp := p.post(t, "/acp", "", c.body)
		b, _ := io.ReadAll(resp.Body)
		got.WriteString("### " + c.name + "\n")
		got.WriteString("# status " + resp.Status + "\n")
		got.Write(bytes.TrimSpace(b))
		got.WriteString("\n")
	}
	path := filepath.Join("testdata", "golden", "acp_shapes.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden (run with -update): %v", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("differs from %s\n--- got\n%s--- want\n%s", path, got.Bytes(), want)
	}
}

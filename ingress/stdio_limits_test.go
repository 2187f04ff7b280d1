package ingress_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// rawStdioLines reads the stdio server's output lines as raw JSON objects,
// numbers kept exact (json.Number), so that ids beyond float64 stay apart.
func rawStdioLines(t *testing.T, out interface{ Read([]byte) (int, error) }) <-chan map[string]any {
	t.Helper()
	c := make(chan map[string]any, 256)
	go func() {
		defer close(c)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Errorf("stdout line is not a JSON object: %q", sc.Text())
				continue
			}
			c <- m
		}
	}()
	return c
}

// TestStdioCancelRequestHugeIDsApart: JSON-RPC ids are exact values;
// acp-go-sdk (the reference the README tests against) keys in-flight
// requests by the exact decimal of a numeric id (canonicalJSONRPCIDKey), so
// two distinct integer ids are two requests. $/cancel_request naming one of
// two calls in flight whose ids differ only beyond float64's precision
// cancels that call; it cancelled the other (canonicalID keyed both by one
// float64).
func TestStdioCancelRequestHugeIDsApart(t *testing.T) {
	in, out, _ := startStdio(t)
	lines := rawStdioLines(t, out)
	const idA, idB = "100000000000000000000001", "100000000000000000000002"
	send(t, in, `{"jsonrpc":"2.0","id":"s","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
	m := testkit.Receive(t, lines, 15*time.Second, "no answer to session/new")
	sid, _ := m["result"].(map[string]any)["sessionId"].(string)
	if sid == "" {
		t.Fatalf("session/new: %v", m)
	}
	for _, id := range []string{idA, idB} {
		send(t, in, `{"jsonrpc":"2.0","id":`+id+`,"method":"_vendor/slow","params":{"sessionId":"`+sid+`","text":"m","delay_ms":1000}}`+"\n")
	}
	send(t, in, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":`+idB+`}}`+"\n")
	for {
		m := testkit.Receive(t, lines, 25*time.Second, "no answer after $/cancel_request of id "+idB)
		if _, ok := m["id"]; !ok {
			continue
		}
		e, _ := m["error"].(map[string]any)
		code, _ := e["code"].(json.Number)
		id := m["id"].(json.Number).String()
		if code.String() == "-32800" && id != idB {
			t.Fatalf("$/cancel_request{requestId:%s} cancelled the other request in flight, id %s (ids beyond float64 precision are one map key: canonicalID): %v", idB, id, m)
		}
		if id == idB {
			if code.String() != "-32800" {
				t.Fatalf("the request named by $/cancel_request was answered %v, want error %d", m, jsonrpc.CodeACPRequestCancelled)
			}
			return
		}
	}
}

// TestStdioLineOneByteOverLimitRefused: a stdio line over the body
// limit is answered -32600 (docs/protocols.md: "A stdio line over the body
// limit (E2A_MAX_BODY_BYTES…) is answered -32600"), as POST /acp refuses a
// body one byte over it (http.MaxBytesReader). readLines allowed limit+2
// bytes including the line's end, meant for "\r\n": a message of limit+1
// bytes ended by "\n" alone got through.
func TestStdioLineOneByteOverLimitRefused(t *testing.T) {
	const limit = 4096
	in, out, _ := startStdio(t, ingress.WithMaxBodyBytes(limit))
	lines := rawStdioLines(t, out)
	head, tail := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"pad":"`, `"}}`
	msg := head + strings.Repeat("a", limit+1-len(head)-len(tail)) + tail
	if len(msg) != limit+1 {
		t.Fatalf("message of %d bytes", len(msg))
	}
	send(t, in, msg+"\n")
	m := testkit.Receive(t, lines, 15*time.Second, "no answer")
	e, _ := m["error"].(map[string]any)
	if code, _ := e["code"].(json.Number); code.String() != "-32600" {
		t.Fatalf("a message of %d bytes (limit %d) must be answered -32600 as over the limit, got %v", len(msg), limit, m)
	}
}

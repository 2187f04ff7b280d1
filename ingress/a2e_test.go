package ingress_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/a2e"
)

func readA2E(t *testing.T, p *pipeline, body string) []a2e.Message {
	t.Helper()
	resp := p.post(t, "/a2e", "application/x-ndjson", body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := decodeA2ELines(t, resp.Body)
	for _, m := range out {
		if m.A2E != "1.0" || m.ID == "" || m.TS == 0 {
			t.Fatalf("base fields missing: %+v", m)
		}
	}
	return out
}

// decodeA2ELines reads the A2E messages of an NDJSON answer, one per line.
func decodeA2ELines(t *testing.T, r io.Reader) []a2e.Message {
	t.Helper()
	var out []a2e.Message
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m a2e.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestA2EHandshakePingRequest(t *testing.T) {
	p := startPipeline(t)
	body := `{"a2e":"1.0","id":"h1","type":"handshake/req","ts":1716123456.789}
{"a2e":"1.0","id":"p1","type":"ping"}
{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"hello","frames":2}
{"a2e":"1.0","id":"s1","type":"shutdown"}
{"a2e":"1.0","id":"p2","type":"ping"}
`
	msgs := readA2E(t, p, body)
	if len(msgs) < 5 {
		t.Fatalf("%d messages", len(msgs))
	}
	if msgs[0].Type != "handshake/resp" || msgs[0].ReqID != "h1" {
		t.Fatalf("first %+v", msgs[0])
	}
	if msgs[1].Type != "pong" || msgs[1].ReqID != "p1" {
		t.Fatalf("second %+v", msgs[1])
	}
	var seq int64 = -1
	events := 0
	for _, m := range msgs[2 : len(msgs)-1] {
		if m.Type != "invoke/event" || m.ReqID != "r-42" || m.Seq == nil || *m.Seq <= seq {
			t.Fatalf("event %+v", m)
		}
		seq = *m.Seq
		events++
	}
	last := msgs[len(msgs)-1]
	if last.Type != "tool/call/resp" || last.ReqID != "r-42" {
		t.Fatalf("response %+v", last)
	}
	if events < 3 {
		t.Fatalf("%d events", events)
	}
	// Nothing after shutdown: the second ping got no pong.
	for _, m := range msgs {
		if m.ReqID == "p2" {
			t.Fatal("answered a message after shutdown")
		}
	}
}

func TestA2EErrorsKeepGoing(t *testing.T) {
	p := startPipeline(t)
	body := `{"a2e":"1.0","id":"x1"
{"a2e":"1.0","id":"x2","ts":"yesterday","type":"ping"}
{"a2e":"1.0","id":"p1","type":"ping"}
`
	msgs := readA2E(t, p, body)
	if len(msgs) != 3 {
		t.Fatalf("%d messages: %+v", len(msgs), msgs)
	}
	for i, m := range msgs[:2] {
		if m.Type != "error" || m.Code == "" || m.Message == "" || m.Retryable == nil || *m.Retryable {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if msgs[1].ReqID != "x2" {
		t.Fatalf("error req_id %q", msgs[1].ReqID)
	}
	if msgs[2].Type != "pong" {
		t.Fatalf("last %+v", msgs[2])
	}
}

func TestA2EAgentFailureIsRetryableError(t *testing.T) {
	p := startPipeline(t)
	msgs := readA2E(t, p, `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"x","fail":"tool_down","retryable":true}`+"\n")
	last := msgs[len(msgs)-1]
	if last.Type != "error" || last.ReqID != "r-1" || last.Code == "" || last.Retryable == nil || !*last.Retryable || last.CapabilityName != "tool" {
		t.Fatalf("error %+v", last)
	}
}

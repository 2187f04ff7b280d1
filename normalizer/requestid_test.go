package normalizer_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// badIDs are refused by the request-id grammar; each is written as a JSON
// string literal (escapes keep the body valid UTF-8 where the id is).
var badIDs = map[string]string{
	"tab":             `"\t"`,
	"newline":         `"\n"`,
	"cr cr":           `"\r\r"`,
	"trailing space":  `"dup "`,
	"leading nbsp":    `"\u00a0dup"`,
	"zero width":      `"a\u200bb"`,
	"line separator":  `"a\u2028b"`,
	"empty":           `""`, // absent: skipped
	"nul inside":      `"a\u0000b"`,
	"too long (1025)": strconv.Quote(longID(subjects.MaxIDLength + 1)),
}

func longID(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func wantInvalidID(t *testing.T, name string, err error) {
	t.Helper()
	if !errors.Is(err, subjects.ErrInvalidID) || !errors.Is(err, normalizer.ErrInvalidParams) {
		t.Fatalf("%s: err = %v, want ErrInvalidParams wrapping subjects.ErrInvalidID", name, err)
	}
	if normalizer.HTTPStatus(err) != 400 || normalizer.JSONRPCCode(err) != -32602 || normalizer.A2ECode(err) != normalizer.A2ECodeInvalidParams {
		t.Fatalf("%s: mapped to %d / %d / %s", name, normalizer.HTTPStatus(err), normalizer.JSONRPCCode(err), normalizer.A2ECode(err))
	}
}

// TestInvalidIDsRefused: every place an id enters an envelope applies the
// grammar — the E2A body's request_id, Input.RequestID (Idempotency-Key)
// for every adapter, A2A taskId/contextId, AgentVault id, ACP sessionId.
func TestInvalidIDsRefused(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for name, lit := range badIDs {
		var raw string
		if err := json.Unmarshal([]byte(lit), &raw); err != nil {
			t.Fatal(err)
		}
		cases := map[string]func() error{
			"e2a body": func() error {
				_, err := n.FromE2A(normalizer.Input{Body: []byte(`{"request_id":` + lit + `,"params":{"text":"hi"}}`)})
				return err
			},
			"a2a taskId": func() error {
				_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","taskId":` + lit + `,"parts":[{"kind":"text","text":"hi"}]}}}`)})
				return err
			},
			"a2a contextId": func() error {
				_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","contextId":` + lit + `,"parts":[{"kind":"text","text":"hi"}]}}}`)})
				return err
			},
			"a2a tasks/get": func() error {
				_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":` + lit + `}}`)})
				return err
			},
			"agentvault id": func() error {
				_, err := n.FromAgentVault(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":` + lit + `,"message":{"role":"user","parts":[{"type":"text","content":"hi"}]}}}`)})
				return err
			},
			"a2e req_id": func() error {
				_, err := n.FromA2E(normalizer.Input{Body: []byte(`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":` + lit + `,"name":"x"}`)})
				return err
			},
			"a2e id": func() error {
				_, err := n.FromA2E(normalizer.Input{Body: []byte(`{"a2e":"1.0","id":` + lit + `,"type":"ping"}`)})
				return err
			},
			"acp sessionId": func() error {
				_, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":` + lit + `,"prompt":[{"type":"text","text":"hi"}]}}`)})
				return err
			},
		}
		if raw == "" {
			// "" means absent in every field: a generated id (or the
			// adapter's own "required" check) takes over.
			continue
		}
		for where, run := range cases {
			wantInvalidID(t, name+" / "+where, run())
		}
		// Input.RequestID (Idempotency-Key) on every adapter that publishes.
		for proto, body := range map[string]string{
			normalizer.ProtocolE2A:        `{"params":{"text":"hi"}}`,
			normalizer.ProtocolA2A:        `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`,
			normalizer.ProtocolAgentVault: `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"hi"}]}}}`,
			normalizer.ProtocolACP:        `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`,
			normalizer.ProtocolA2E:        `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"hi"}`,
			normalizer.ProtocolWorkflow:   `{"type":"operationUpdate","operationId":"wait","operation":{"Wait":{"duration":10}}}` + "\n" + `{"type":"beginExecution","executionId":"exec-1","operationOrder":["wait"]}`,
		} {
			adapt, _ := n.Adapter(proto)
			_, err := adapt(normalizer.Input{Body: []byte(body), RequestID: raw})
			wantInvalidID(t, name+" / Input.RequestID / "+proto, err)
		}
	}
	// The error carries what the protocol's answer echoes.
	_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":"q7","method":"tasks/get","params":{"id":"t "}}`)})
	if got := string(normalizer.ErrorJSONRPCID(err)); got != `"q7"` {
		t.Errorf("JSON-RPC id of the error = %s", got)
	}
	_, err = n.FromA2E(normalizer.Input{Body: []byte(`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"hi"}`), RequestID: "x\n"})
	var ne *normalizer.Error
	if !errors.As(err, &ne) || ne.ReqID != "r-42" {
		t.Errorf("A2E error req_id: %v", err)
	}
	// Accepted ids are kept byte for byte.
	for _, id := range []string{"a b", "日本", "=YWJj", "a:0", "e\u0301"} {
		res, err := n.FromE2A(normalizer.Input{Body: []byte(`{"params":{}}`), RequestID: id})
		if err != nil || res.Envelope.RequestID != id {
			t.Errorf("id %+q: %v, %+q", id, err, res.Envelope.RequestID)
		}
	}
}

// TestA2ERefusedIDNotEchoed: an A2E req_id (or id, which answers for a
// message without req_id) outside the request-id grammar is refused up
// front and never becomes the error's req_id, which the front door
// echoes as the answer's own req_id (the client matches on it): a 1 MiB or
// control-character req_id came back whole in the error line, and in
// every line of an accepted call's answer. The error names the message
// by a valid id instead, else by none; its message quotes the value cut.
func TestA2ERefusedIDNotEchoed(t *testing.T) {
	n := testNormalizer(t)
	huge := `\u001b[2J\n` + strings.Repeat("x", 1<<20)
	for _, c := range []struct{ name, body, wantReqID string }{
		{"huge req_id", `{"id":"c1","type":"tool/call/req","req_id":"` + huge + `","name":"x"}`, "c1"},
		{"req_id with a newline", `{"id":"c1","type":"tool/call/req","req_id":"r\n1","name":"x"}`, "c1"},
		{"req_id of 1025 bytes", `{"id":"c1","type":"x/req","req_id":"` + longID(subjects.MaxIDLength+1) + `"}`, "c1"},
		{"huge req_id, huge id", `{"id":"` + huge + `","type":"x/req","req_id":"` + huge + `"}`, ""},
		{"huge id", `{"id":"` + huge + `","type":"ping"}`, ""},
		{"huge req_id, type missing", `{"id":"c1","req_id":"` + huge + `"}`, "c1"},
		{"huge req_id, required field missing", `{"id":"c1","type":"tool/call/req","req_id":"` + huge + `"}`, "c1"},
		{"id with ESC, valid req_id", `{"id":"c\u001b1","type":"ping","req_id":"r1"}`, "r1"},
	} {
		_, err := n.FromA2E(normalizer.Input{Body: []byte(c.body)})
		var ne *normalizer.Error
		if !errors.As(err, &ne) || normalizer.A2ECode(err) == "" {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if ne.ReqID != c.wantReqID {
			t.Errorf("%s: error req_id %.40q, want %q", c.name, ne.ReqID, c.wantReqID)
		}
		checkBoundedMessage(t, err.Error())
	}
	for _, id := range []string{"r-42", "0190b5a8-4a1b-7c2d-9e3f-0123456789ab", longID(subjects.MaxIDLength), "a b", "日本"} {
		res, err := n.FromA2E(normalizer.Input{Body: []byte(`{"id":"c1","type":"x/req","req_id":"` + id + `"}`)})
		if err != nil || res.Envelope.CorrelationID != id {
			t.Errorf("req_id %.40q: %v", id, err)
		}
	}
}

// TestInvalidUTF8IsParseError: a body with invalid UTF-8 is refused by
// every adapter instead of being repaired with U+FFFD.
func TestInvalidUTF8IsParseError(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for proto, body := range map[string]string{
		normalizer.ProtocolE2A:        `{"request_id":"r-` + "\xff" + `","params":{"text":"hi"}}`,
		normalizer.ProtocolA2A:        `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"h` + "\xc0\xaf" + `i"}]}}}`,
		normalizer.ProtocolAgentVault: `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"` + "\xed\xa0\x80" + `"}]}}}`,
		normalizer.ProtocolACP:        `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"` + "\xfe" + `"}]}}`,
		normalizer.ProtocolA2E:        `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"` + "\x80" + `"}`,
		normalizer.ProtocolWorkflow:   `{"workflow":"{\"type\":\"beginExecution\",\"executionId\":\"e` + "\xff" + `\",\"operationOrder\":[]}"}`,
	} {
		adapt, _ := n.Adapter(proto)
		_, err := adapt(normalizer.Input{Body: []byte(body)})
		if !errors.Is(err, normalizer.ErrParse) || normalizer.JSONRPCCode(err) != -32700 || normalizer.HTTPStatus(err) != 400 ||
			!strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%s: err = %v, want ErrParse", proto, err)
		}
	}
	// Params handed over already decoded by a front door are checked too.
	_, err := n.FromA2A(normalizer.Input{RPC: &normalizer.RPCRequest{ID: []byte("1"), Method: "message/send",
		Params: []byte(`{"message":{"kind":"message","role":"user","messageId":"m` + "\xff" + `","parts":[{"kind":"text","text":"hi"}]}}`)}})
	if !errors.Is(err, normalizer.ErrParse) || string(normalizer.ErrorJSONRPCID(err)) != "1" {
		t.Errorf("decoded params: err = %v", err)
	}
}

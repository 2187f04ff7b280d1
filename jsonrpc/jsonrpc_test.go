package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

func TestJSONRPCDecodeSingle(t *testing.T) {
	cases := []struct {
		name     string
		body     string
		code     int    // whole-body error code, 0 if none
		itemCode int    // element error code, 0 if valid
		id       string // expected raw id ("" = nil)
		method   string
		params   string
		notif    bool
	}{
		{name: "valid string id", body: `{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"t"},"id":"r1"}`, id: `"r1"`, method: "tasks/get", params: `{"id":"t"}`},
		{name: "valid number id", body: ` {"jsonrpc":"2.0","method":"m","params":[1,2],"id":7} `, id: `7`, method: "m", params: `[1,2]`},
		{name: "null id is a request", body: `{"jsonrpc":"2.0","method":"m","id":null}`, id: `null`, method: "m"},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"session/cancel","params":{}}`, method: "session/cancel", params: `{}`, notif: true},
		{name: "params null read as absent", body: `{"jsonrpc":"2.0","method":"m","params":null,"id":1}`, id: `1`, method: "m"},
		{name: "extra members ignored", body: `{"jsonrpc":"2.0","method":"m","id":1,"x":{"y":[]}}`, id: `1`, method: "m"},
		{name: "parse error", body: `{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]`, code: CodeParseError},
		{name: "empty body", body: ``, code: CodeParseError},
		{name: "whitespace body", body: " \n", code: CodeParseError},
		{name: "trailing garbage", body: `{"jsonrpc":"2.0","method":"m","id":1} x`, code: CodeParseError},
		{name: "two objects", body: `{"jsonrpc":"2.0","method":"m","id":1}{"jsonrpc":"2.0","method":"m","id":2}`, code: CodeParseError},
		{name: "scalar body", body: `"hello"`, code: CodeInvalidRequest},
		{name: "number body", body: `1`, code: CodeInvalidRequest},
		{name: "empty batch", body: `[]`, code: CodeInvalidRequest},
		{name: "wrong version", body: `{"jsonrpc":"1.0","method":"m","id":1}`, itemCode: CodeInvalidRequest, id: `1`},
		{name: "numeric version", body: `{"jsonrpc":2.0,"method":"m","id":1}`, itemCode: CodeInvalidRequest, id: `1`},
		{name: "missing version", body: `{"method":"m","id":"a"}`, itemCode: CodeInvalidRequest, id: `"a"`},
		{name: "case-sensitive members", body: `{"JSONRPC":"2.0","Method":"m","id":1}`, itemCode: CodeInvalidRequest, id: `1`},
		{name: "method not string", body: `{"jsonrpc":"2.0","method":1,"params":"bar"}`, itemCode: CodeInvalidRequest},
		{name: "method missing", body: `{"jsonrpc":"2.0","id":3}`, itemCode: CodeInvalidRequest, id: `3`},
		{name: "method empty", body: `{"jsonrpc":"2.0","method":"","id":3}`, itemCode: CodeInvalidRequest, id: `3`},
		{name: "id object", body: `{"jsonrpc":"2.0","method":"m","id":{"a":1}}`, itemCode: CodeInvalidRequest},
		{name: "id bool", body: `{"jsonrpc":"2.0","method":"m","id":true}`, itemCode: CodeInvalidRequest},
		{name: "id array", body: `{"jsonrpc":"2.0","method":"m","id":[1]}`, itemCode: CodeInvalidRequest},
		{name: "params string", body: `{"jsonrpc":"2.0","method":"m","params":"bar","id":4}`, itemCode: CodeInvalidRequest, id: `4`},
		{name: "params number", body: `{"jsonrpc":"2.0","method":"m","params":5,"id":4}`, itemCode: CodeInvalidRequest, id: `4`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls, batch, err := Decode([]byte(tc.body), DecodeOptions{})
			if tc.code != 0 {
				if err == nil || err.Code != tc.code {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected body error %v", err)
			}
			if batch || len(calls) != 1 {
				t.Fatalf("batch=%v len=%d", batch, len(calls))
			}
			c := calls[0]
			if tc.itemCode != 0 {
				if c.Err == nil || c.Err.Code != tc.itemCode {
					t.Fatalf("item err = %v, want %d", c.Err, tc.itemCode)
				}
			} else if c.Err != nil {
				t.Fatalf("item err = %v", c.Err)
			}
			if string(c.Request.ID) != tc.id {
				t.Fatalf("id = %q, want %q", c.Request.ID, tc.id)
			}
			if tc.itemCode == 0 {
				if c.Request.Method != tc.method || string(c.Request.Params) != tc.params || c.Request.JSONRPC != "2.0" {
					t.Fatalf("request = %+v", c.Request)
				}
				if c.Request.IsNotification() != tc.notif {
					t.Fatalf("notification = %v", c.Request.IsNotification())
				}
			}
		})
	}
}

func TestJSONRPCDepthCap(t *testing.T) {
	nest := func(n int) string {
		return `{"jsonrpc":"2.0","method":"m","id":1,"params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	// The request object is level 1, so params may nest MaxDepth-1 levels.
	if _, _, err := Decode([]byte(nest(63)), DecodeOptions{}); err != nil {
		t.Fatalf("depth 64 refused: %v", err)
	}
	_, _, err := Decode([]byte(nest(64)), DecodeOptions{})
	if err == nil || err.Code != CodeInvalidRequest || !strings.Contains(err.Message, "nesting") {
		t.Fatalf("depth 65: err = %v", err)
	}
	// Brackets inside strings do not count.
	body := `{"jsonrpc":"2.0","method":"m","id":1,"params":{"s":"` + strings.Repeat(`[{\"`, 200) + `"}}`
	if _, _, err := Decode([]byte(body), DecodeOptions{}); err != nil {
		t.Fatalf("brackets in strings counted: %v", err)
	}
	// A very deep body is refused without recursion trouble, as the
	// nesting it is (-32600), not as invalid JSON: past encoding/json's
	// 10,000 levels it was answered -32700 "the body is not valid JSON".
	deep := strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000)
	if _, _, err := Decode([]byte(deep), DecodeOptions{}); err == nil || err.Code != CodeInvalidRequest || !strings.Contains(err.Message, "nesting") {
		t.Fatalf("deep body: err = %v", err)
	}
	if _, _, err := Decode([]byte(nest(20_000)), DecodeOptions{}); err == nil || err.Code != CodeInvalidRequest || !strings.Contains(err.Message, "nesting") {
		t.Fatalf("depth 20,001: err = %v", err)
	}
	// Deep and invalid stays a parse error.
	if _, _, err := Decode([]byte(strings.Repeat("[", 20_000)), DecodeOptions{}); err == nil || err.Code != CodeParseError {
		t.Fatalf("deep unterminated body: err = %v", err)
	}
	if _, _, err := Decode([]byte(nest(10)), DecodeOptions{MaxDepth: 5}); err == nil {
		t.Fatal("custom depth ignored")
	}
}

func TestJSONRPCBatch(t *testing.T) {
	body := `[
		{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},
		{"jsonrpc":"2.0","method":"notify_hello","params":[7]},
		{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"},
		{"foo":"boo"},
		{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},
		{"jsonrpc":"2.0","method":"message/stream","params":{},"id":"6"},
		{"jsonrpc":"2.0","method":"message/stream","params":{}},
		1,
		{"jsonrpc":"2.0","method":"get_data","id":"9"}
	]`
	calls, batch, derr := Decode([]byte(body), DecodeOptions{})
	if derr != nil || !batch || len(calls) != 9 {
		t.Fatalf("decode: %v %v %d", derr, batch, len(calls))
	}
	var ran []string
	h := func(_ context.Context, r *Request) (any, *Error) {
		ran = append(ran, r.Method)
		switch r.Method {
		case "sum":
			return 7, nil
		case "subtract":
			return 19, nil
		case "get_data":
			return []any{"hello", 5}, nil
		case "notify_hello":
			return nil, InternalError("ignored")
		}
		return nil, MethodNotFound(r.Method)
	}
	streaming := func(m string) bool { return m == "message/stream" }
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/a2a", nil)
	if err := WriteBatch(rec, Batch(req.Context(), calls, streaming, h)); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d", rec.Code)
	}
	var got []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	want := []string{
		`{"id":"1","jsonrpc":"2.0","result":7}`,
		`{"id":"2","jsonrpc":"2.0","result":19}`,
		`{"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\": \"2.0\""},"id":null,"jsonrpc":"2.0"}`,
		`{"error":{"code":-32601,"message":"Method not found: \"foo.get\""},"id":"5","jsonrpc":"2.0"}`,
		`{"error":{"code":-32600,"message":"Invalid Request: streaming method \"message/stream\" cannot be part of a batch; send it alone"},"id":"6","jsonrpc":"2.0"}`,
		`{"error":{"code":-32600,"message":"Invalid Request: a request must be a JSON object"},"id":null,"jsonrpc":"2.0"}`,
		`{"id":"9","jsonrpc":"2.0","result":["hello",5]}`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d responses: %s", len(got), rec.Body)
	}
	for i := range want {
		b, _ := json.Marshal(got[i])
		if string(b) != want[i] {
			t.Errorf("response %d = %s\nwant %s", i, b, want[i])
		}
	}
	// The streaming notification runs (no response, as alone); the
	// streaming request with an id is refused.
	if strings.Join(ran, ",") != "sum,notify_hello,subtract,foo.get,message/stream,get_data" {
		t.Fatalf("ran %v", ran)
	}

	// All notifications: nothing at all.
	calls, _, _ = Decode([]byte(`[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b","params":[]}]`), DecodeOptions{})
	rec = httptest.NewRecorder()
	if err := WriteBatch(rec, Batch(req.Context(), calls, streaming, h)); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("all notifications: %d %q", rec.Code, rec.Body)
	}

	// Invalid batch [1]: one error in an array.
	calls, batch, derr = Decode([]byte(`[1]`), DecodeOptions{})
	if derr != nil || !batch || len(calls) != 1 || calls[0].Err == nil {
		t.Fatalf("[1]: %v %v %+v", derr, batch, calls)
	}

	// Too large.
	big := "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"m","id":1},`, 4), ",") + "]"
	if _, _, derr := Decode([]byte(big), DecodeOptions{MaxBatch: 3}); derr == nil || derr.Code != CodeInvalidRequest {
		t.Fatalf("oversize batch: %v", derr)
	}
	if _, _, derr := Decode([]byte(big), DecodeOptions{MaxBatch: 4}); derr != nil {
		t.Fatalf("batch at limit: %v", derr)
	}
}

func TestJSONRPCWriteHelpers(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := WriteResult(rec, json.RawMessage(`"a"`), nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(rec.Body.String()); got != `{"jsonrpc":"2.0","id":"a","result":null}` {
		t.Fatalf("null result: %s", got)
	}
	rec = httptest.NewRecorder()
	_ = WriteError(rec, nil, ParseError("the body is not valid JSON"))
	if got := strings.TrimSpace(rec.Body.String()); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}` {
		t.Fatalf("parse error: %s", got)
	}
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	_ = WriteError(rec, json.RawMessage(`12`), &Error{Code: -32001, Message: "Task not found", Data: map[string]string{"taskId": "t1"}})
	if got := strings.TrimSpace(rec.Body.String()); got != `{"jsonrpc":"2.0","id":12,"error":{"code":-32001,"message":"Task not found","data":{"taskId":"t1"}}}` {
		t.Fatalf("data: %s", got)
	}
	// An unencodable result becomes -32603, not a broken body.
	rec = httptest.NewRecorder()
	if err := WriteResult(rec, json.RawMessage(`1`), func() {}); err == nil {
		t.Fatal("no error for unencodable result")
	}
	if !bytes.Contains(rec.Body.Bytes(), []byte(`"code":-32603`)) {
		t.Fatalf("unencodable: %s", rec.Body)
	}
	if e := MethodNotFound(strings.Repeat("x", 1000)); len(e.Message) > 200 {
		t.Fatalf("method echoed unbounded: %d", len(e.Message))
	}
	var err error = InvalidParams("x")
	if !strings.Contains(err.Error(), "-32602") {
		t.Fatal(err)
	}
}

// FuzzDecode checks that the decoder never panics and that whatever
// it returns can be answered with well-formed JSON-RPC.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","role":"user","parts":[{"kind":"text","text":"hi"}],"messageId":"m1"}},"id":1}`,
		`[{"jsonrpc":"2.0","method":"a","id":"x"},{"jsonrpc":"2.0","method":"b"},1,{}]`,
		`{"jsonrpc":"2.0","method":"m","id":null,"params":null}`,
		`[]`, `[[]]`, `{}`, `null`, `"x"`, ``, `{"id":{"a":1}}`, `{"jsonrpc":"2.0","method":"\u0000","id":-1.5e10}`,
		strings.Repeat("[", 70) + strings.Repeat("]", 70),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		opts := DecodeOptions{MaxDepth: 16, MaxBatch: 8}
		calls, batch, err := Decode(body, opts)
		if err != nil {
			if len(calls) != 0 {
				t.Fatal("calls with a body error")
			}
			if err.Code != CodeParseError && err.Code != CodeInvalidRequest {
				t.Fatalf("body error code %d", err.Code)
			}
			// Valid JSON is UTF-8 (RFC 8259 section 8.1; doc.go: invalid
			// UTF-8 is -32700); json.Valid passes bad bytes in strings.
			if err.Code == CodeParseError && json.Valid(body) && utf8.Valid(body) {
				t.Fatal("parse error for valid JSON")
			}
			checkResponse(t, ErrorResponse(nil, err))
			return
		}
		if !json.Valid(body) || !utf8.Valid(body) || jsonstr.Deeper(body, opts.MaxDepth) {
			t.Fatal("accepted invalid or too deep body")
		}
		if len(calls) == 0 || (!batch && len(calls) != 1) || len(calls) > opts.MaxBatch {
			t.Fatalf("batch=%v len=%d", batch, len(calls))
		}
		for _, c := range calls {
			if c.Request.ID != nil && !validID(c.Request.ID) {
				t.Fatalf("bad id %q", c.Request.ID)
			}
			if c.Err != nil {
				if c.Err.Code != CodeInvalidRequest {
					t.Fatalf("element error code %d", c.Err.Code)
				}
				checkResponse(t, ErrorResponse(c.Request.ID, c.Err))
				continue
			}
			r := c.Request
			if r.JSONRPC != "2.0" || r.Method == "" {
				t.Fatalf("invalid request accepted: %+v", r)
			}
			if r.Params != nil && r.Params[0] != '{' && r.Params[0] != '[' {
				t.Fatalf("params %q", r.Params)
			}
			// A valid request re-encoded decodes to itself.
			b, merr := json.Marshal(r)
			if merr != nil {
				t.Fatal(merr)
			}
			again, _, derr := Decode(b, DecodeOptions{MaxDepth: 1 << 20})
			if derr != nil || again[0].Err != nil || again[0].Request.Method != r.Method ||
				!bytes.Equal(again[0].Request.ID, r.ID) || (r.Params == nil) != (again[0].Request.Params == nil) {
				t.Fatalf("round trip: %s -> %+v %v", b, again, derr)
			}
			checkResponse(t, ResultResponse(r.ID, r.Params))
		}
	})
}

func validID(id json.RawMessage) bool {
	var v any
	d := json.NewDecoder(bytes.NewReader(id))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return false
	}
	switch v.(type) {
	case nil, string, json.Number:
		return true
	}
	return false
}

func checkResponse(t *testing.T, r Response) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal response: %v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("response not an object: %s", b)
	}
	_, hasRes := m["result"]
	_, hasErr := m["error"]
	if string(m["jsonrpc"]) != `"2.0"` || hasRes == hasErr || m["id"] == nil {
		t.Fatalf("malformed response %s", b)
	}
}

// TestScanCallMatches: the scan of a plain request reads what the map
// decode reads, and leaves every other shape to it.
func TestScanCallMatches(t *testing.T) {
	for _, s := range scanCallCases {
		checkScanCall(t, []byte(s))
	}
}

var scanCallCases = []string{
	`{"jsonrpc":"2.0","method":"message/stream","params":{"message":{"parts":[{"kind":"text","text":"a\"b"}]}},"id":"r-1"}`,
	`{ "id" : 7 , "method" : "m" , "jsonrpc" : "2.0" }`, `{"jsonrpc":"2.0","method":"m","id":null,"params":null}`,
	`{"jsonrpc":"2.0","method":"m","params":[1,2],"id":-1.5e3}`, `{"jsonrpc":"2.0","method":"m","method":"n"}`,
	`{"jsonrpc":"2.0","method":"\u006d"}`, `{"jsonrpc":"2.0","\u006dethod":"m"}`, `{"jsonrpc":"2.0","method":""}`,
	`{"jsonrpc":"2.0","method":"m","id":true}`, `{"jsonrpc":"2.0","method":"m","params":3}`, `{"jsonrpc":2.0,"method":"m"}`,
	`{"jsonrpc":"2.0"}`, `{"method":"m"}`, `{"jsonrpc":"2.0","method":5}`, `{"Method":"m","jsonrpc":"2.0"}`, `{}`,
}

func checkScanCall(t *testing.T, el []byte) {
	t.Helper()
	got, ok := scanCall(el)
	if !ok {
		return
	}
	want := decodeCallMap(el)
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("%s:\nscan %s\nmap  %s", el, g, w)
	}
}

// FuzzScanCall: on any JSON object, scanCall reads what decodeCallMap
// reads or leaves it to it.
func FuzzScanCall(f *testing.F) {
	for _, s := range scanCallCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, el []byte) {
		el = bytes.TrimSpace(el)
		if len(el) == 0 || el[0] != '{' || !json.Valid(el) {
			return
		}
		checkScanCall(t, el)
	})
}

// TestValidID: a string, a number or null, as one JSON value, is an id;
// anything else is not.
func TestValidID(t *testing.T) {
	for raw, want := range map[string]bool{
		`"a"`: true, `12345678901234567890`: true, `-1.5e3`: true, `null`: true, ` 7 `: true,
		``: false, `{}`: false, `[1]`: false, `true`: false, `"a" "b"`: false, `nul`: false, `1 2`: false,
	} {
		if got := ValidID(json.RawMessage(raw)); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", raw, got, want)
		}
	}
}

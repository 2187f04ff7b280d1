package e2a_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestFromJSONCompatibility covers every reading rule of spec §9 and the
// AgentRequest mapping of §10, one row each. want is the written envelope.
func TestFromJSONCompatibility(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// channel_id → channel
		{"channel_id read as channel", `{"channel_id":"feishu"}`, `{"channel":"feishu"}`},
		{"channel wins over channel_id", `{"channel":"web","channel_id":"feishu"}`, `{"channel":"web"}`},
		{"channel_id after channel still loses", `{"channel_id":"feishu","channel":"web"}`, `{"channel":"web"}`},
		{"null channel falls back to channel_id", `{"channel":null,"channel_id":"feishu"}`, `{"channel":"feishu"}`},
		{"null channel_id ignored", `{"channel_id":null}`, `{}`},

		// req_method → method
		{"req_method read as method", `{"req_method":"chat.send"}`, `{"method":"chat.send"}`},
		{"method wins over req_method", `{"method":"history.get","req_method":"chat.send"}`, `{"method":"history.get"}`},
		{"heartbeat: null method stays absent", `{"method":null}`, `{}`},

		// metadata → channel_context only when channel_context is empty
		{"metadata to channel_context", `{"metadata":{"k":"v"}}`, `{"channel_context":{"k":"v"}}`},
		{"metadata when channel_context empty object", `{"channel_context":{},"metadata":{"k":"v"}}`, `{"channel_context":{"k":"v"}}`},
		{"metadata when channel_context null", `{"channel_context":null,"metadata":{"k":1}}`, `{"channel_context":{"k":1}}`},
		{"channel_context set: metadata dropped", `{"channel_context":{"a":1},"metadata":{"k":"v"}}`, `{"channel_context":{"a":1}}`},
		{"empty metadata ignored", `{"metadata":{}}`, `{}`},
		{"null metadata ignored", `{"metadata":null}`, `{}`},

		// binding → provenance.details.migrated_from_binding
		{"binding migrated, default provenance", `{"binding":{"agent":"x"}}`,
			`{"provenance":{"source_protocol":"e2a","details":{"migrated_from_binding":{"agent":"x"}}}}`},
		{"binding merged into existing provenance", `{"provenance":{"source_protocol":"acp","details":{"jsonrpc_method":"initialize"}},"binding":"b1"}`,
			`{"provenance":{"source_protocol":"acp","details":{"jsonrpc_method":"initialize","migrated_from_binding":"b1"}}}`},
		{"binding before provenance in the input", `{"binding":[1,2],"provenance":{"source_protocol":"a2a"}}`,
			`{"provenance":{"source_protocol":"a2a","details":{"migrated_from_binding":[1,2]}}}`},
		{"null binding ignored", `{"binding":null}`, `{}`},

		// payload merged into params without overwriting
		{"payload becomes params", `{"payload":{"text":"hi"}}`, `{"params":{"text":"hi"}}`},
		{"payload never overwrites params", `{"params":{"text":"new","mode":"plan"},"payload":{"text":"old","page_idx":2}}`,
			`{"params":{"text":"new","mode":"plan","page_idx":2}}`},
		{"payload after null params", `{"params":null,"payload":{"a":1}}`, `{"params":{"a":1}}`},
		{"empty payload ignored", `{"payload":{}}`, `{}`},
		{"null payload ignored", `{"payload":null}`, `{}`},

		// float / int / string epoch → RFC 3339 UTC
		{"float epoch", `{"timestamp":1774524781.15}`, `{"timestamp":"2026-03-26T11:33:01.150000+00:00"}`},
		{"int epoch", `{"timestamp":1774524781}`, `{"timestamp":"2026-03-26T11:33:01+00:00"}`},
		{"exponent epoch", `{"timestamp":1.774524781e9}`, `{"timestamp":"2026-03-26T11:33:01+00:00"}`},
		{"numeric string epoch", `{"timestamp":"1774524781.5"}`, `{"timestamp":"2026-03-26T11:33:01.500000+00:00"}`},
		{"zero epoch", `{"timestamp":0}`, `{"timestamp":"1970-01-01T00:00:00+00:00"}`},
		{"negative epoch", `{"timestamp":-1.5}`, `{"timestamp":"1969-12-31T23:59:58.500000+00:00"}`},
		{"microsecond rounding", `{"timestamp":1.0000004}`, `{"timestamp":"1970-01-01T00:00:01+00:00"}`},
		{"RFC 3339 string kept as written", `{"timestamp":"2026-03-28T12:00:00Z"}`, `{"timestamp":"2026-03-28T12:00:00Z"}`},
		{"deadline epoch", `{"deadline":1774524781}`, `{"deadline":"2026-03-26T11:33:01+00:00"}`},

		// null jsonrpc_id is absent; string and number ids kept verbatim
		{"null jsonrpc_id", `{"jsonrpc_id":null}`, `{}`},
		{"numeric jsonrpc_id", `{"jsonrpc_id":42}`, `{"jsonrpc_id":42}`},
		{"big numeric jsonrpc_id exact", `{"jsonrpc_id":123456789012345678901234567890}`, `{"jsonrpc_id":123456789012345678901234567890}`},
		{"string jsonrpc_id", `{"jsonrpc_id":"42"}`, `{"jsonrpc_id":"42"}`},
		{"escaped string jsonrpc_id canonical", `{"jsonrpc_id":"\u0041b"}`, `{"jsonrpc_id":"Ab"}`},

		// RFC 3339 leap second: read as the next second, in UTC
		{"leap second", `{"timestamp":"2016-12-31T23:59:60Z"}`, `{"timestamp":"2017-01-01T00:00:00+00:00"}`},
		{"leap second with an offset", `{"deadline":"1990-12-31T15:59:60.5-08:00"}`, `{"deadline":"1991-01-01T00:00:00.500000+00:00"}`},
		// numbers in free-form objects survive exactly
		{"big numbers in params", `{"params":{"n":12345678901234567890,"f":0.1}}`, `{"params":{"n":12345678901234567890,"f":0.1}}`},
		// unknown keys are dropped, never an error
		{"unknown key dropped", `{"x_unknown":{"a":1},"method":"m"}`, `{"method":"m"}`},
		{"trace kept", `{"trace":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`,
			`{"trace":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`},
		{"empty trace dropped", `{"trace":{}}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := e2a.FromJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("FromJSON(%s): %v", tt.in, err)
			}
			got, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("FromJSON(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestDecodeStrict: one JSON value, white space around it, numbers as
// json.Number; anything after the value is refused, a stray bracket or
// brace (which json.Decoder's More and Token let through) included.
func TestDecodeStrict(t *testing.T) {
	for _, s := range []string{`{} x`, `{}}`, `{} ]`, `{} {}`} {
		var m map[string]any
		if err := e2a.DecodeStrict([]byte(s), &m); err == nil {
			t.Errorf("DecodeStrict(%q) accepted trailing data", s)
		}
	}
	var m map[string]any
	if err := e2a.DecodeStrict([]byte(" {\"a\":1} \n"), &m); err != nil || m["a"] != json.Number("1") {
		t.Errorf("DecodeStrict: %v %#v", err, m)
	}
}

// TestFromJSONRejects covers input FromJSON refuses, and which sentinel it
// wraps. The message says what was wrong in JSON's words (a client reads
// it), never with the Go types of encoding/json's ("cannot unmarshal
// array into Go value of type map[string]json.RawMessage").
func TestFromJSONRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, e2a.MaxNesting+1) + "1" + strings.Repeat("}", e2a.MaxNesting+1)
	tests := []struct {
		name string
		in   string
		want error
		says string // part of the message, when set
	}{
		{"empty", ``, e2a.ErrInvalidJSON, ""},
		{"not JSON", `{"a":`, e2a.ErrInvalidJSON, ""},
		{"array", `[1,2]`, e2a.ErrInvalidJSON, "must be a JSON object, not an array"},
		{"string", `"x"`, e2a.ErrInvalidJSON, "must be a JSON object, not a string"},
		{"null", `null`, e2a.ErrInvalidJSON, "must be a JSON object, not null"},
		{"trailing data", `{} {}`, e2a.ErrInvalidJSON, ""},
		{"trailing bracket", `{} ]`, e2a.ErrInvalidJSON, ""},
		{"trailing brace", `{"method":"m"}}`, e2a.ErrInvalidJSON, ""},
		{"trailing garbage", `{}x`, e2a.ErrInvalidJSON, ""},
		{"too deep", deep, e2a.ErrInvalidJSON, ""},
		{"method not a string", `{"method":1}`, e2a.ErrInvalidEnvelope, ""},
		{"req_method not a string", `{"req_method":true}`, e2a.ErrInvalidEnvelope, ""},
		{"channel_id not a string", `{"channel_id":{}}`, e2a.ErrInvalidEnvelope, ""},
		{"params not an object", `{"params":[1]}`, e2a.ErrInvalidEnvelope, `field "params": must be an object, not an array`},
		{"params a string", `{"params":"x"}`, e2a.ErrInvalidEnvelope, `field "params": must be an object, not a string`},
		{"payload not an object", `{"payload":"x"}`, e2a.ErrInvalidEnvelope, `field "payload": must be an object, not a string`},
		{"metadata not an object", `{"metadata":"x"}`, e2a.ErrInvalidEnvelope, `field "metadata": must be an object, not a string`},
		{"is_stream not a bool", `{"is_stream":"yes"}`, e2a.ErrInvalidEnvelope, ""},
		{"timestamp bool", `{"timestamp":true}`, e2a.ErrInvalidEnvelope, ""},
		{"timestamp out of range", `{"timestamp":1e300}`, e2a.ErrInvalidEnvelope, ""},
		{"jsonrpc_id object", `{"jsonrpc_id":{}}`, e2a.ErrInvalidEnvelope, ""},
		{"jsonrpc_id bool", `{"jsonrpc_id":true}`, e2a.ErrInvalidEnvelope, ""},
		{"request_id bool", `{"request_id":false}`, e2a.ErrInvalidEnvelope, ""},
		// §4.1 types request_id string / null: a number was read as its text.
		{"request_id number", `{"request_id":12}`, e2a.ErrInvalidEnvelope, ""},
		{"is_stream number", `{"is_stream":1}`, e2a.ErrInvalidEnvelope, ""},
		{"expected_output_modes null element", `{"expected_output_modes":[null]}`, e2a.ErrInvalidEnvelope, ""},
		{"leap second at noon", `{"deadline":"2016-12-31T12:00:60Z"}`, e2a.ErrInvalidEnvelope, ""},
		{"provenance not an object", `{"provenance":"acp"}`, e2a.ErrInvalidEnvelope, `field "provenance": must be an object, not a string`},
		{"provenance member", `{"provenance":{"source_protocol":1}}`, e2a.ErrInvalidEnvelope, `field "provenance.source_protocol": must be a string, not a number`},
		{"auth member", `{"auth":{"extra_headers":["x"]}}`, e2a.ErrInvalidEnvelope, `field "auth.extra_headers": must be an object, not an array`},
		{"expected_output_modes not strings", `{"expected_output_modes":[1]}`, e2a.ErrInvalidEnvelope, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := e2a.FromJSON([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("FromJSON(%.60s) = %+v, %v; want %v", tt.in, env, err, tt.want)
			}
			if m := err.Error(); !strings.Contains(m, tt.says) || strings.Contains(m, "Go ") || strings.Contains(m, "json: ") {
				t.Errorf("FromJSON(%.60s): %q, want it to say %q in JSON's words", tt.in, m, tt.says)
			}
		})
	}
}

// TestFromJSONInvalidUTF8: strings with invalid UTF-8 are read with U+FFFD,
// so whatever is written is valid UTF-8.
func TestFromJSONInvalidUTF8(t *testing.T) {
	in := []byte("{\"method\":\"a\xffb\",\"jsonrpc_id\":\"id\xfe\",\"params\":{\"k\xc3\":\"v\xed\xa0\x80\"}}")
	env, err := e2a.FromJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(out) {
		t.Errorf("written envelope is not valid UTF-8: %q", out)
	}
	if env.Method != "a\uFFFDb" {
		t.Errorf("method = %q", env.Method)
	}
}

// TestFromJSONHugeString reads a 10 MB string.
func TestFromJSONHugeString(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	env, err := e2a.FromJSON([]byte(`{"params":{"text":"` + big + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if env.ParamString("text") != big {
		t.Error("10 MB string not kept")
	}
}

func TestEpochToRFC3339(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
		ok   bool
	}{
		{0, "1970-01-01T00:00:00+00:00", true},
		{1774524781.15, "2026-03-26T11:33:01.150000+00:00", true},
		{253402300799, "9999-12-31T23:59:59+00:00", true},
		{253402300799.9999999, "", false}, // rounds into year 10000
		{-62135596800, "0001-01-01T00:00:00+00:00", true},
		{1e300, "", false},
	} {
		got, err := e2a.EpochToRFC3339(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("EpochToRFC3339(%v) = %q, %v", tt.in, got, err)
		}
	}
}

func TestEnvelopeClone(t *testing.T) {
	in := `{"jsonrpc_id":1,"params":{"a":{"b":[1,{"c":2}]}},"provenance":{"source_protocol":"e2a","details":{"x":{}}},"auth":{"extra_headers":{"h":"v"},"_meta":{"m":[]}},"trace":{"traceparent":"t"},"expected_output_modes":["a"]}`
	env, err := e2a.FromJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(env)
	c := env.Clone()
	c.JSONRPCID[0] = '9'
	c.Params["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = "changed"
	c.Provenance.Details["x"] = 1
	c.Auth.ExtraHeaders["h"] = "changed"
	c.Auth.Meta["m"] = 1
	c.Trace.Traceparent = "changed"
	c.ExpectedOutputModes[0] = "changed"
	after, _ := json.Marshal(env)
	if string(before) != string(after) {
		t.Errorf("Clone shares state:\n%s\n%s", before, after)
	}
	if (*e2a.Envelope)(nil).Clone() != nil {
		t.Error("nil Clone")
	}
	// CloneValue: any decoded value, an array at the top too.
	v := []any{map[string]any{"k": []any{"x"}}, "s"}
	cv := e2a.CloneValue(v).([]any)
	cv[0].(map[string]any)["k"].([]any)[0] = "changed"
	cv[1] = "changed"
	if v[0].(map[string]any)["k"].([]any)[0] != "x" || v[1] != "s" {
		t.Errorf("CloneValue shares state: %v", v)
	}
}

func TestParamAccessors(t *testing.T) {
	env, err := e2a.FromJSON([]byte(`{"params":{"s":"x","n":5,"f":2.0,"ns":"7","bad":"x1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if env.ParamString("s") != "x" || env.ParamString("n") != "" {
		t.Error("ParamString")
	}
	for k, want := range map[string]int64{"n": 5, "f": 2, "ns": 7, "bad": -1, "missing": -1} {
		if got := env.ParamInt(k, -1); got != want {
			t.Errorf("ParamInt(%s) = %d, want %d", k, got, want)
		}
	}
	var nilEnv *e2a.Envelope
	if nilEnv.ParamString("s") != "" || nilEnv.ParamInt("n", 3) != 3 {
		t.Error("nil envelope accessors")
	}
}

package normalizer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
)

// The conformance suite: one set of properties every adapter must have.
// Each adapter contributes a body template with placeholders:
//
//	%ID%    the JSON-RPC id member ("id":<value>,) or nothing
//	%TEXT%  a JSON string placed where the user's text goes
//	%META%  a JSON value placed in a free-form object
//	%NULLS% optional protocol members written as null (or left out)
//
// and the body carries secrets (SECRET-…) in every place a client could
// put one; the headers carry more.
type confCase struct {
	protocol string
	template string
	nulls    string // members for %NULLS%, written with null values
	jsonrpc  bool   // %ID% is a JSON-RPC id
	// textPath finds the text in the envelope.
	textPath func(*e2a.Envelope) any
	// bad lists malformed bodies and the sentinel each must give.
	bad map[string]error
	// roundTrip, when set, checks the protocol's own round trip.
	roundTrip func(t *testing.T, body []byte, env *e2a.Envelope)
}

var confCases = []confCase{
	{
		protocol: normalizer.ProtocolE2A,
		template: `{"request_id":"req-c",%ID%%NULLS%"method":"chat.send","session_id":"s1","params":{"text":%TEXT%,"extra":%META%},"auth":{"method_id":"bearer","bearer_token":"SECRET-BODY-1","extra_headers":{"X-K":"SECRET-BODY-2"}},"channel_context":{"Cookie":"SECRET-BODY-3"}}`,
		nulls:    `"correlation_id":null,"task_id":null,"a2a_metadata":null,"trace":null,"provenance":null,`,
		jsonrpc:  true,
		textPath: func(e *e2a.Envelope) any { return e.Params["text"] },
		bad: map[string]error{
			`{"method":`:          normalizer.ErrParse,
			`[1]`:                 normalizer.ErrInvalidRequest,
			`{"params":"x"}`:      normalizer.ErrInvalidRequest,
			`{"is_stream":"yes"}`: normalizer.ErrInvalidRequest,
		},
	},
	{
		protocol: normalizer.ProtocolACP,
		template: `{"jsonrpc":"2.0",%ID%"method":"session/prompt","params":{%NULLS%"sessionId":"s1","prompt":[{"type":"text","text":%TEXT%}],"_meta":{"extra":%META%,"authorization":"Bearer SECRET-BODY-1","x-api-key":"SECRET-BODY-2"}}}`,
		jsonrpc:  true,
		textPath: func(e *e2a.Envelope) any {
			return e.Params["prompt"].([]any)[0].(map[string]any)["text"]
		},
		bad: map[string]error{
			`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":`:                   normalizer.ErrParse,
			`{"jsonrpc":"2.0","id":1}`:                                                      normalizer.ErrInvalidRequest,
			`{"id":1,"method":"session/prompt","params":{}}`:                                normalizer.ErrInvalidRequest,
			`{"jsonrpc":"2.0","id":true,"method":"initialize"}`:                             normalizer.ErrInvalidRequest,
			`{"jsonrpc":"2.0","id":1,"method":"chat.send","params":{}}`:                     normalizer.ErrMethodNotFound,
			`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":[1]}`:               normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"session/cancel","params":{}}`:                normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`: normalizer.ErrInvalidParams,
		},
		roundTrip: func(t *testing.T, body []byte, env *e2a.Envelope) {
			call, err := normalizer.EnvelopeToACPPeerCall(env)
			if err != nil {
				t.Fatalf("EnvelopeToACPPeerCall: %v", err)
			}
			got, _ := json.Marshal(call)
			// The secrets of the template come back redacted, nothing else changes.
			body = regexp.MustCompile(`"[^"]*SECRET[^"]*"`).ReplaceAll(body, []byte(`"[redacted]"`))
			if !jsonEq(t, got, body) {
				t.Errorf("ACP → E2A → ACP differs:\n got %.300s\nwant %.300s", got, body)
			}
		},
	},
	{
		protocol: normalizer.ProtocolA2A,
		template: `{"jsonrpc":"2.0",%ID%"method":"message/send","params":{"message":{%NULLS%"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":%TEXT%}],"metadata":{"extra":%META%,"api_key":"SECRET-BODY-1"}},"configuration":{"pushNotificationConfig":{"url":"https://u:SECRET-BODY-3@h/x?token=SECRET-BODY-4","token":"SECRET-BODY-2","authentication":{"schemes":["Bearer"],"credentials":"SECRET-BODY-5"}}}}}`,
		nulls:    `"contextId":null,"taskId":null,"extensions":null,"referenceTaskIds":null,`,
		jsonrpc:  true,
		textPath: func(e *e2a.Envelope) any { return e.Params["text"] },
		bad: map[string]error{
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{`:                                                                         normalizer.ErrParse,
			`[{"jsonrpc":"2.0","id":1,"method":"message/send"}]`:                                                                                 normalizer.ErrInvalidRequest,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{}}`:                                                                         normalizer.ErrMethodNotFound,
			`{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`:                                                             normalizer.ErrExtendedCardNotConfigured,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`:                                                                       normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"message/send"}`:                                                                                   normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":5}}}`:                                              normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":7}}`:                                                                 normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"video"}]}}}`: normalizer.ErrInvalidParams,
		},
	},
	{
		protocol: normalizer.ProtocolAgentVault,
		template: `{"jsonrpc":"2.0",%ID%"method":"tasks/send","params":{%NULLS%"message":{"role":"user","parts":[{"type":"text","content":%TEXT%}],"metadata":{"mcp_context":{"extra":%META%},"x-api-key":"SECRET-BODY-1"}},"webhookUrl":"https://u:SECRET-BODY-2@h/hook"}}`,
		nulls:    `"id":null,`,
		jsonrpc:  true,
		textPath: func(e *e2a.Envelope) any { return e.Params["text"] },
		bad: map[string]error{
			`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":`: normalizer.ErrParse,
			`"tasks/send"`: normalizer.ErrInvalidRequest,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`:                                   normalizer.ErrMethodNotFound,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{}}`:                                     normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":""}}`:                            normalizer.ErrInvalidParams,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[]}}}`: normalizer.ErrInvalidParams,
		},
	},
	{
		protocol: normalizer.ProtocolA2E,
		template: `{"a2e":"1.0",%NULLS%"id":"a1","type":"tool/call/req","req_id":"a1","name":"n","args":{"text":%TEXT%,"extra":%META%,"password":"SECRET-BODY-1"}}`,
		nulls:    `"ts":null,"version":null,`,
		textPath: func(e *e2a.Envelope) any { return e.Params["args"].(map[string]any)["text"] },
		bad: map[string]error{
			`{"type":"ping"`:             normalizer.ErrParse,
			`["ping"]`:                   normalizer.ErrInvalidRequest,
			`{"id":"x"}`:                 normalizer.ErrInvalidRequest,
			`{"type":7}`:                 normalizer.ErrInvalidRequest,
			`{"type":"ping","id":5}`:     normalizer.ErrInvalidRequest,
			`{"type":"invoke/event"}`:    normalizer.ErrInvalidParams,
			`{"type":"ping"} {"type":1}`: normalizer.ErrInvalidRequest,
		},
	},
	{
		protocol: normalizer.ProtocolWorkflow,
		template: `{"type":"operationUpdate",%NULLS%"operationId":"op-1","operation":{"ApiCall":{"method":"POST","url":"https://x","body":{"text":%TEXT%,"extra":%META%},"headers":{"Authorization":"Bearer SECRET-BODY-1","X-Api-Key":"SECRET-BODY-2"},"outputPath":"/workflow/r"}}}` + "\n" +
			`{"type":"beginExecution","executionId":"e1","operationOrder":["op-1"]}`,
		textPath: func(e *e2a.Envelope) any {
			op := e.Params["operations"].([]any)[0].(map[string]any)["operation"].(map[string]any)
			return op["ApiCall"].(map[string]any)["body"].(map[string]any)["text"]
		},
		bad: map[string]error{
			`{"workflow": "x"`: normalizer.ErrParse,
			`{"workflow": []}`: normalizer.ErrInvalidRequest,
			`{"type":"beginExecution","executionId":"e","operationOrder":["nope"]}`: normalizer.ErrInvalidParams,
			``:    normalizer.ErrInvalidParams,
			`[1]`: normalizer.ErrInvalidParams,
		},
	},
}

// confHeaders carries secrets in every header a client could use.
func confHeaders() http.Header {
	return http.Header{
		"Authorization":       {"Bearer SECRET-HDR-1"},
		"X-Api-Key":           {"SECRET-HDR-2"},
		"Cookie":              {"session=SECRET-HDR-3"},
		"Proxy-Authorization": {"Basic SECRET-HDR-4"},
		"X-User-Id":           {"u-conf"},
		"Traceparent":         {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
}

func (c confCase) body(id, text, meta string, nulls bool) []byte {
	idMember := ""
	if id != "" {
		idMember = `"id":` + id + `,`
		if c.protocol == normalizer.ProtocolE2A {
			idMember = `"jsonrpc_id":` + id + `,`
		}
	}
	n := ""
	if nulls {
		n = c.nulls
	}
	r := strings.NewReplacer("%ID%", idMember, "%TEXT%", text, "%META%", meta, "%NULLS%", n)
	return []byte(r.Replace(c.template))
}

func (c confCase) run(t testing.TB, n *normalizer.Normalizer, body []byte) (*normalizer.Result, error) {
	t.Helper()
	adapter, ok := n.Adapter(c.protocol)
	if !ok {
		t.Fatalf("no adapter %s", c.protocol)
	}
	return adapter(normalizer.Input{Body: body, Header: confHeaders(), Now: func() time.Time { return fixedNow }, NewID: counter()})
}

func jsonEq(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	dx := json.NewDecoder(bytes.NewReader(a))
	dx.UseNumber()
	dy := json.NewDecoder(bytes.NewReader(b))
	dy.UseNumber()
	if dx.Decode(&x) != nil || dy.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// noSecrets fails when the marshaled envelope holds any secret marker.
func noSecrets(t *testing.T, env *e2a.Envelope) []byte {
	t.Helper()
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(b, []byte("SECRET")); i >= 0 {
		lo, hi := max(0, i-80), min(len(b), i+40)
		t.Errorf("secret in envelope: …%s…", b[lo:hi])
	}
	return b
}

func forEachCase(t *testing.T, f func(t *testing.T, c confCase)) {
	for _, c := range confCases {
		t.Run(c.protocol, func(t *testing.T) { f(t, c) })
	}
	// Completeness: every registered protocol's adapter has its case.
	for _, p := range protocols.All() {
		if !slices.ContainsFunc(confCases, func(c confCase) bool { return c.protocol == p.Adapter }) {
			t.Errorf("protocol %s (adapter %s) has no conformance case", p.Name, p.Adapter)
		}
	}
	if len(confCases) != len(normalizer.Protocols) {
		t.Errorf("conformance covers %d adapters, there are %d", len(confCases), len(normalizer.Protocols))
	}
}

func TestConformanceValid(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		body := c.body(`"r-1"`, `"hello"`, `{"k":[1,2.5,null,true]}`, false)
		res, err := c.run(t, n, body)
		if err != nil {
			t.Fatalf("valid body refused: %v\n%s", err, body)
		}
		checkEnvelope(t, res)
		noSecrets(t, res.Envelope)
		if got := c.textPath(res.Envelope); got != "hello" {
			t.Errorf("text = %v", got)
		}
		if res.Envelope.Provenance.Converter != normalizer.Converter(c.protocol) {
			t.Errorf("converter = %q", res.Envelope.Provenance.Converter)
		}
		if res.Envelope.Provenance.ConvertedAt != "2026-03-30T10:00:00+00:00" {
			t.Errorf("converted_at = %q", res.Envelope.Provenance.ConvertedAt)
		}
		if tr := res.Envelope.Trace; tr == nil || tr.Traceparent != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
			t.Errorf("trace = %+v", tr)
		}
		if res.Envelope.UserID != "u-conf" {
			t.Errorf("user_id = %q (X-User-ID)", res.Envelope.UserID)
		}
		if c.roundTrip != nil {
			c.roundTrip(t, body, res.Envelope)
		}
	})
}

// TestConformanceDeterministic: the same input gives the same bytes.
func TestConformanceDeterministic(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		body := c.body(`7`, `"x"`, `{"a":{"b":[1,{"c":2}]},"z":1,"y":2}`, false)
		var first []byte
		for i := 0; i < 5; i++ {
			res, err := c.run(t, n, body)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if first == nil {
				first = b
			} else if !bytes.Equal(first, b) {
				t.Fatalf("run %d differs:\n%s\n%s", i, first, b)
			}
		}
	})
}

// TestConformanceRenormalize: every envelope an adapter writes is a valid
// raw E2A request, and normalizing it again changes nothing.
func TestConformanceRenormalize(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		res, err := c.run(t, n, c.body(`"r-2"`, `"hi"`, `{"n":12345678901234567890}`, false))
		if err != nil {
			t.Fatal(err)
		}
		first, _ := json.Marshal(res.Envelope)
		again, err := n.FromE2A(normalizer.Input{Body: first, Now: func() time.Time { return fixedNow.Add(time.Hour) }})
		if err != nil {
			t.Fatalf("FromE2A of a normalized envelope: %v", err)
		}
		second, _ := json.Marshal(again.Envelope)
		if res.Op == normalizer.OpSubmit && !bytes.Equal(first, second) {
			t.Errorf("re-normalizing changed the envelope:\n%s\n%s", first, second)
		}
		if again.Pool != res.Pool {
			t.Errorf("pool %q → %q", res.Pool, again.Pool)
		}
	})
}

// TestConformanceNullVsAbsent: an optional protocol member written as null
// means the same as leaving it out; a free-form null is data and is kept.
func TestConformanceNullVsAbsent(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		if c.nulls != "" {
			a, err := c.run(t, n, c.body(`1`, `"x"`, `{}`, false))
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.run(t, n, c.body(`1`, `"x"`, `{}`, true))
			if err != nil {
				t.Fatalf("null members refused: %v", err)
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if !bytes.Equal(ja, jb) {
				t.Errorf("null differs from absent:\n%s\n%s", ja, jb)
			}
		}
		res, err := c.run(t, n, c.body(`1`, `"x"`, `null`, false))
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(res.Envelope); !bytes.Contains(b, []byte(`"extra":null`)) {
			t.Errorf("free-form null lost: %s", b)
		}
	})
}

// TestConformanceJSONRPCIDs: a JSON-RPC id is kept with its type and exact
// value; null is answered with null; absent is a notification. An error
// carries the id so that the answer can echo it.
func TestConformanceJSONRPCIDs(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		if !c.jsonrpc {
			t.Skip("no JSON-RPC id")
		}
		for in, want := range map[string]string{
			`42`: `42`, `"42"`: `"42"`, `0`: `0`, `-7`: `-7`, `1.5`: `1.5`, `1e3`: `1e3`,
			`12345678901234567890123`: `12345678901234567890123`, `""`: `""`,
			`"\u0041-\u00e9"`: `"A-é"`, `"id with \"quotes\""`: `"id with \"quotes\""`,
		} {
			res, err := c.run(t, n, c.body(in, `"x"`, `{}`, false))
			if err != nil {
				t.Fatalf("id %s: %v", in, err)
			}
			if got := string(res.Envelope.JSONRPCID); got != want {
				t.Errorf("id %s → %s, want %s", in, got, want)
			}
			if res.Notification {
				t.Errorf("id %s: notification", in)
			}
		}
		res, err := c.run(t, n, c.body(`null`, `"x"`, `{}`, false))
		if err != nil || res.Envelope.JSONRPCID != nil || res.Notification {
			t.Errorf("null id: %v %s notification=%v", err, res.Envelope.JSONRPCID, res.Notification)
		}
		res, err = c.run(t, n, c.body(``, `"x"`, `{}`, false))
		if err != nil {
			t.Fatal(err)
		}
		if c.protocol != normalizer.ProtocolE2A && (!res.Notification || res.Envelope.Provenance.Details[normalizer.DetailNotification] != true) {
			t.Errorf("absent id is not a notification: %+v", res)
		}
		for _, bad := range []string{`true`, `{}`, `[1]`} {
			if _, err := c.run(t, n, c.body(bad, `"x"`, `{}`, false)); !errors.Is(err, normalizer.ErrInvalidRequest) {
				t.Errorf("id %s: %v", bad, err)
			}
		}
		if c.protocol == normalizer.ProtocolE2A {
			return
		}
		// An error echoes the id.
		body := bytes.Replace(c.body(`"err-9"`, `"x"`, `{}`, false), []byte(`"params":`), []byte(`"params":5,"x":`), 1)
		_, err = c.run(t, n, body)
		if err == nil {
			t.Fatalf("broken params accepted: %s", body)
		}
		if got := string(normalizer.ErrorJSONRPCID(err)); got != `"err-9"` {
			t.Errorf("error id = %s (%v)", got, err)
		}
	})
}

// TestConformanceDeepNesting: nesting beyond e2a.MaxNesting is a parse
// error, never a stack overflow; nesting within it is kept.
func TestConformanceDeepNesting(t *testing.T) {
	n := testNormalizer(t)
	deep := func(d int) string { return strings.Repeat(`{"a":`, d) + `1` + strings.Repeat(`}`, d) }
	forEachCase(t, func(t *testing.T, c confCase) {
		if _, err := c.run(t, n, c.body(`1`, `"x"`, deep(e2a.MaxNesting+10), false)); !errors.Is(err, normalizer.ErrParse) && !errors.Is(err, normalizer.ErrInvalidParams) {
			t.Errorf("too deep: %v", err)
		}
		if _, err := c.run(t, n, c.body(`1`, `"x"`, strings.Repeat("[", 100000), false)); err == nil {
			t.Error("100000 open brackets accepted")
		}
		res, err := c.run(t, n, c.body(`1`, `"x"`, deep(40), false))
		if err != nil {
			t.Fatalf("depth 40 refused: %v", err)
		}
		checkEnvelope(t, res)
	})
}

// TestConformanceHugeString: a 10 MB text arrives intact.
func TestConformanceHugeString(t *testing.T) {
	if testing.Short() {
		t.Skip("10 MB bodies")
	}
	n := testNormalizer(t)
	big := strings.Repeat("0123456789", 1<<20)
	forEachCase(t, func(t *testing.T, c confCase) {
		res, err := c.run(t, n, c.body(`1`, `"`+big+`"`, `{}`, false))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := c.textPath(res.Envelope).(string); got != big {
			t.Errorf("10 MB text not kept (len %d)", len(got))
		}
		noSecrets(t, res.Envelope)
	})
}

// TestConformanceInvalidUTF8: invalid UTF-8 is either refused as a parse
// error or replaced by U+FFFD; the envelope is always valid UTF-8.
func TestConformanceInvalidUTF8(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		for _, bad := range []string{"\"a\xffb\"", "\"\xed\xa0\x80\"", "\"\xc3\""} {
			body := c.body(`"i\xfed"`, bad, "{\"k\xff\":\"\xfe\"}", false)
			res, err := c.run(t, n, body)
			if err != nil {
				if !errors.Is(err, normalizer.ErrParse) {
					t.Errorf("invalid UTF-8 refused with %v", err)
				}
				continue
			}
			b := noSecrets(t, res.Envelope)
			if !utf8.Valid(b) {
				t.Errorf("envelope is not valid UTF-8: %q", b)
			}
			if s, _ := c.textPath(res.Envelope).(string); !utf8.ValidString(s) || !strings.ContainsRune(s, utf8.RuneError) {
				t.Errorf("text %q", s)
			}
		}
	})
}

// TestConformanceErrors: malformed input gives the right sentinel, wrapped
// in *normalizer.Error, and maps to a JSON-RPC code and an HTTP status.
func TestConformanceErrors(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		for body, want := range c.bad {
			res, err := c.run(t, n, []byte(body))
			if !errors.Is(err, want) {
				t.Errorf("%.80s: got %v (%v), want %v", body, err, res, want)
				continue
			}
			var ne *normalizer.Error
			if !errors.As(err, &ne) || ne.Protocol == "" {
				t.Errorf("%.80s: not a *normalizer.Error with its protocol: %#v", body, err)
			}
			if code := normalizer.JSONRPCCode(err); code > -32000 || code < -32700 {
				t.Errorf("JSON-RPC code %d", code)
			}
			if s := normalizer.HTTPStatus(err); s < 400 || s > 599 {
				t.Errorf("HTTP status %d", s)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error message holds a secret: %v", err)
			}
		}
	})
}

// TestConformanceSecretRef: with a SecretRef hook, secrets become
// references; the hook only ever sees secrets; normalizing again is stable.
func TestConformanceSecretRef(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	ref := func(kind, value string) string {
		if strings.HasPrefix(value, "vault://") {
			return value
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(value, "SECRET") {
			panic(fmt.Sprintf("SecretRef called with a non-secret %s=%q", kind, value))
		}
		r := fmt.Sprintf("vault://%d", len(seen))
		seen[kind+"="+value] = r
		return r
	}
	base := testNormalizer(t)
	_ = base
	n := normalizer.New(normalizer.Config{SecretRef: ref})
	forEachCase(t, func(t *testing.T, c confCase) {
		res, err := c.run(t, n, c.body(`1`, `"x"`, `{}`, false))
		if err != nil {
			t.Fatal(err)
		}
		b := noSecrets(t, res.Envelope)
		if !bytes.Contains(b, []byte("vault://")) {
			t.Errorf("no reference written: %s", b)
		}
		if c.protocol == normalizer.ProtocolE2A {
			a := res.Envelope.Auth
			if a.BearerToken != "" || !strings.HasPrefix(a.CredentialRef, "vault://") || !strings.HasPrefix(a.ExtraHeaders["X-K"], "vault://") {
				t.Errorf("auth = %+v", a)
			}
		}
		again, err := n.FromE2A(normalizer.Input{Body: b})
		if err != nil {
			t.Fatal(err)
		}
		if b2, _ := json.Marshal(again.Envelope); res.Op == normalizer.OpSubmit && !bytes.Equal(b, b2) {
			t.Errorf("not stable with references:\n%s\n%s", b, b2)
		}
	})
}

// TestConformanceConcurrent runs every adapter from many goroutines (run
// with -race to check the shared registry and configuration).
func TestConformanceConcurrent(t *testing.T) {
	n := testNormalizer(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range confCases {
				adapter, _ := n.Adapter(c.protocol)
				if _, err := adapter(normalizer.Input{Body: c.body(`1`, `"x"`, `{}`, false)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestConformancePreDecodedRPC: a JSON-RPC request the front door already
// decoded (Input.RPC, e.g. a batch element) normalizes exactly like the
// same request as a body.
func TestConformancePreDecodedRPC(t *testing.T) {
	n := testNormalizer(t)
	forEachCase(t, func(t *testing.T, c confCase) {
		if !c.jsonrpc || c.protocol == normalizer.ProtocolE2A {
			t.Skip("not a JSON-RPC protocol")
		}
		adapter, _ := n.Adapter(c.protocol)
		for _, id := range []string{`"r-1"`, `12`, `null`, ``} {
			body := c.body(id, `"x"`, `{"a":1}`, false)
			var raw struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(body, &raw); err != nil {
				t.Fatal(err)
			}
			if id == `null` {
				raw.ID = json.RawMessage(`null`)
			}
			a, errA := c.run(t, n, body)
			b, errB := adapter(normalizer.Input{RPC: &normalizer.RPCRequest{ID: raw.ID, Method: raw.Method, Params: raw.Params},
				Header: confHeaders(), Now: func() time.Time { return fixedNow }, NewID: counter()})
			if errA != nil || errB != nil {
				t.Fatalf("id %s: %v / %v", id, errA, errB)
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if !bytes.Equal(ja, jb) {
				t.Errorf("id %s: body and RPC differ:\n%s\n%s", id, ja, jb)
			}
		}
		_, err := adapter(normalizer.Input{RPC: &normalizer.RPCRequest{ID: json.RawMessage(`"q"`), Method: "nope"}})
		if !errors.Is(err, normalizer.ErrMethodNotFound) || string(normalizer.ErrorJSONRPCID(err)) != `"q"` {
			t.Errorf("unknown method via RPC: %v", err)
		}
	})
}

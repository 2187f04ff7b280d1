package a2av1

import (
	"encoding/json"
	"testing"
)

// TestProtoScopesAnswer: the extended card's answers rewritten to the
// specification's scopes form, the JSON-RPC members before the result
// and the trailing newline as written; an error, a result that is no
// card object and what is no JSON pass through untouched.
func TestProtoScopesAnswer(t *testing.T) {
	const card = `{"name":"x","securityRequirements":[{"schemes":{"oauth2":["a"]}}]}`
	const spec = `{"name":"x","securityRequirements":[{"schemes":{"oauth2":{"list":["a"]}}}]}`
	for _, tc := range []struct {
		name, in string
		rpc      bool
		want     string // "" when untouched
	}{
		{"rest", card + "\n", false, spec + "\n"},
		{"rpc", `{"jsonrpc":"2.0","id":"a\"result\":1","result":` + card + "}\n", true,
			`{"jsonrpc":"2.0","id":"a\"result\":1","result":` + spec + "}\n"},
		{"rpc numeric id", `{"jsonrpc":"2.0","id":7,"result":` + card + `}`, true, `{"jsonrpc":"2.0","id":7,"result":` + spec + `}`},
		{"rpc error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32007,"message":"no","data":{"result":1}}}` + "\n", true, ""},
		{"rpc result no object", `{"jsonrpc":"2.0","id":1,"result":[1]}`, true, ""},
		{"rpc cut", `{"jsonrpc":"2.0","id":1,"result":{"name":`, true, ""},
		{"rest no JSON", "not found\n", false, ""},
		{"rest list", "[]", false, ""},
		{"empty", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := protoScopesAnswer([]byte(tc.in), tc.rpc)
			switch {
			case tc.want == "" && ok:
				t.Errorf("rewritten to %s; want it untouched", out)
			case tc.want != "" && (!ok || string(out) != tc.want):
				t.Errorf("got %s (%v), want %s", out, ok, tc.want)
			}
		})
	}
}

// FuzzProtoScopesAnswer: whatever the answer, no panic; a rewritten one
// is valid JSON.
func FuzzProtoScopesAnswer(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"securityRequirements":[{"schemes":{"a":["b"]}}]}}`), true)
	f.Add([]byte(`{"securityRequirements":[{"schemes":{"a":null}}],"skills":[{"securityRequirements":7}]}`), false)
	f.Add([]byte(`{"jsonrpc":"2.0","id":"\"result\":","result":{}}`), true)
	f.Fuzz(func(t *testing.T, b []byte, rpc bool) {
		out, ok := protoScopesAnswer(b, rpc)
		if ok && !json.Valid(out) {
			t.Fatalf("%q rewritten to invalid JSON %q", b, out)
		}
	})
}

package a2av1_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestProtoScopes: every security requirement's scopes, the card's and
// each skill's, in the specification's {"list": [...]}; a bare list, a
// null and a requirement already in that form alike; the rest of the card
// as it was (numbers as written).
func TestProtoScopes(t *testing.T) {
	in := `{"name":"x","n":12345678901234567890,"securityRequirements":[{"schemes":{"apiKey":[],"oauth2":["a","b"]}},` +
		`{"schemes":{"bearer":null}},{"schemes":{"mtls":{"list":["c"]}}},{}],` +
		`"skills":[{"id":"s","securityRequirements":[{"schemes":{"oauth2":["d"]}}]},{"id":"t"}]}`
	var card map[string]any
	if err := json.Unmarshal([]byte(in), &card); err != nil {
		t.Fatal(err)
	}
	card["n"] = json.Number("12345678901234567890")
	got, err := a2av1.ProtoScopes(card)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	const want = `{"n":12345678901234567890,"name":"x","securityRequirements":[{"schemes":{"apiKey":{"list":[]},"oauth2":{"list":["a","b"]}}},` +
		`{"schemes":{"bearer":{"list":[]}}},{"schemes":{"mtls":{"list":["c"]}}},{}],` +
		`"skills":[{"id":"s","securityRequirements":[{"schemes":{"oauth2":{"list":["d"]}}}]},{"id":"t"}]}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	if _, err := a2av1.ProtoScopes(func() {}); err == nil {
		t.Error("a value that is no JSON: no error")
	}
}

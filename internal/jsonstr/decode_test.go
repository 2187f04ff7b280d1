package jsonstr

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// checkValue compares Value with encoding/json on valid input: with
// UseNumber (a json.Decoder) and with floats (json.Unmarshal into an any).
func checkValue(t *testing.T, data []byte) {
	t.Helper()
	if !Valid(data) {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("json.Decoder on valid %q: %v", data, err)
	}
	got, end, ok := Value(data, 0, false)
	if !ok || !reflect.DeepEqual(got, want) || len(bytes.TrimSpace(data[end:])) != 0 {
		t.Fatalf("Value(%q) = %#v, %d, %v; encoding/json %#v", data, got, end, ok, want)
	}
	var wantF any
	if err := json.Unmarshal(data, &wantF); err != nil {
		// A number beyond float64's range: json.Unmarshal refuses it,
		// and so must Value with floats.
		if _, _, ok := Value(data, 0, true); ok {
			t.Fatalf("Value(%q, floats) ok; json.Unmarshal: %v", data, err)
		}
		return
	}
	gotF, _, ok := Value(data, 0, true)
	if !ok || !reflect.DeepEqual(gotF, wantF) {
		t.Fatalf("Value(%q, floats) = %#v, %v; json.Unmarshal %#v", data, gotF, ok, wantF)
	}
}

var valueCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `true`, `false`, `null`, ` {"a" : [1, 2, {"b":null}] } `,
	`{"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, "\"\xff\xfe\"", `{"a":1,"a":2}`, `{"k\u00e9y":"v"}`,
	`{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}]},"metadata":{"n":12345678901234567890}}`,
	`1e400`, `[1e400]`, `{"\ud800":"\udc00"}`,
}

func TestValueMatchesEncodingJSON(t *testing.T) {
	for _, c := range valueCases {
		checkValue(t, []byte(c))
	}
}

// FuzzValue: on valid JSON, Value answers as encoding/json does.
func FuzzValue(f *testing.F) {
	for _, c := range append(valueCases, validCases...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkValue(t, data) })
}

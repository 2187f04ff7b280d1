package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `-12.25E-2`, `true`, `false`, `null`, ` {"a" : [1, 2, {"b":null}] } `,
	`{"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, "\"\xff\xfe\"", `"é"`,
	`01`, `1.`, `.5`, `1e`, `-`, `+1`, `[1,]`, `{"a":1,}`, `{"a"}`, `{a:1}`, `"\x"`, `"\u12"`, "\"a\x01\"", `tru`,
	`nulls`, `[1 2]`, `{"a":1 "b":2}`, `"`, `[`, `{`, `1 2`, ``, ` `, `{"a":}`, "\"\\u00zz\"", `[-]`, `0x1`, `1e+`,
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	deeper := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	for _, c := range append(validCases, deep, deeper, `{"a":`+deep+`}`) {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid %v", c, got, want)
		}
	}
	if !Valid([]byte(deep)) || Valid([]byte(deeper)) {
		t.Fatal("the nesting limit is not encoding/json's")
	}
}

// FuzzValid: Valid is json.Valid, on any input.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", data, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	frame := []byte(`{"protocol_version":"1.0","response_id":"019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b","request_id":"req-0001","sequence":3,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-11-25T10:30:00.123456Z","provenance":{"source_protocol":"e2a","converter":"agent","details":{"pool":"bench","worker":"w-1"}},"body":{"delta_kind":"text","delta":"` + strings.Repeat("abcdefghij", 10) + `"},"task_id":"task-1","context_id":"ctx-1"}`)
	b.Run("jsonstr", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			Valid(frame)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			json.Valid(frame)
		}
	})
}

package jsonstr

import (
	"encoding/json"
	"slices"
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

var membersCases = []string{
	`{"a":1,"b":[1,{"c":"}"}],"d":{"e":null},"f":"x\"y"}`, ` { "a" : true } `, `{}`, ` {} `, `{"a":1}x`, `{"a\u0062":1}`,
	`{"a":1,}`, `{"a" 1}`, `{"a":[1,]}`, `[{"a":1}]`, `"s"`, `{"a":{"b":{"c":[[[]]]}}}`, `{"":0}`, "{\"a\":\"\x01\"}",
}

// FuzzValidMembers: ValidMembers is json.Valid, then Members: the same
// answer and the same members.
func FuzzValidMembers(f *testing.F) {
	for _, c := range append(membersCases, validCases...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want []string
		ok := ValidMembers(data, func(k, v []byte) bool { got = append(got, string(k), string(v)); return true })
		wantOK := json.Valid(data) && Members(data, func(k, v []byte) bool { want = append(want, string(k), string(v)); return true })
		if ok != wantOK {
			t.Fatalf("ValidMembers(%q) = %v, json.Valid and Members %v", data, ok, wantOK)
		}
		if ok && !slices.Equal(got, want) {
			t.Fatalf("ValidMembers(%q) members %q, Members %q", data, got, want)
		}
	})
}

// TestValidMembersDepth: the nesting limit counts the object itself; fn
// returning false stops the scan.
func TestValidMembersDepth(t *testing.T) {
	deep := `{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`
	deeper := `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`
	none := func(k, v []byte) bool { return true }
	if !ValidMembers([]byte(deep), none) || ValidMembers([]byte(deeper), none) || json.Valid([]byte(deeper)) {
		t.Fatal("the nesting limit is not encoding/json's")
	}
	n := 0
	if ValidMembers([]byte(`{"a":1,"b":2,"c":3}`), func(k, v []byte) bool { n++; return string(k) != "b" }) || n != 2 {
		t.Fatalf("fn false: %d calls", n)
	}
}

func BenchmarkValidMembers(b *testing.B) {
	frame := []byte(`{"protocol_version":"1.0","response_id":"019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b","request_id":"req-0001","sequence":3,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-11-25T10:30:00.123456Z","provenance":{"source_protocol":"e2a","converter":"agent","details":{"pool":"bench","worker":"w-1"}},"body":{"delta_kind":"text","delta":"` + strings.Repeat("abcdefghij", 10) + `"},"task_id":"task-1","context_id":"ctx-1"}`)
	n := 0
	count := func(k, v []byte) bool { n++; return true }
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			ValidMembers(frame, count)
		}
	})
	b.Run("valid-then-members", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			_ = Valid(frame) && Members(frame, count)
		}
	})
}

package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// hostile are strings every escaping rule of encoding/json applies to.
var hostile = []string{"", "plain", `"quoted"`, `back\slash`, "<script>&amp;</script>", "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
	"\u2028\u2029", "bad \xff\xfe utf8", "é 中文 🙂", "\b\f"}

func FuzzAppend(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

func TestAppendAllBytes(t *testing.T) {
	var b strings.Builder
	for c := range 256 {
		b.WriteByte(byte(c))
		b.WriteRune(rune(c))
	}
	b.WriteString("\u2028\u2029\ufffd\U0010ffff")
	s := b.String()
	want, _ := json.Marshal(s)
	if got := Append(nil, s); !bytes.Equal(got, want) {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

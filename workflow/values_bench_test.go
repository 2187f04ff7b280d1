package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// benchAnswer is an API answer of the size a workflow step reads: a list
// of 50 objects of a few fields each (about 6 KiB).
func benchAnswer() []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range 50 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item %d","tags":["a","b"],"price":{"amount":"12.50","currency":"EUR"},"active":true}`, 1000000+i, i)
	}
	b.WriteString(`],"next":null}`)
	return []byte(b.String())
}

// BenchmarkDecodeJSON measures what the depth bound costs a step's read
// of an API answer: decodeJSON (the depth scan, then the decode) against
// the decode alone, and depthAtMost, the walk each operation's output
// gets.
func BenchmarkDecodeJSON(b *testing.B) {
	data := benchAnswer()
	b.Run("decodeJSON", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := decodeJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-only", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("depth-scan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := e2a.CheckDepth(data, maxValueDepth); err != nil {
				b.Fatal(err)
			}
		}
	})
	v, err := decodeJSON(data)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("depthAtMost", func(b *testing.B) {
		for b.Loop() {
			if !depthAtMost(v, maxValueDepth) {
				b.Fatal("too deep")
			}
		}
	})
}

package jsonstr

import "testing"

// TestDeeper pins the nesting count: containers count, brackets inside
// strings (escaped quotes included) do not.
func TestDeeper(t *testing.T) {
	cases := []struct {
		data string
		max  int
		want bool
	}{
		{`{}`, 1, false},
		{`{}`, 0, true},
		{`[[1],[2]]`, 2, false},
		{`[[[1]]]`, 2, true},
		{`{"a":"[[[[","b":{"c":[]}}`, 3, false},
		{`{"a":"\"[[[[","b":{"c":[]}}`, 2, true},
		{`"[[["`, 0, false},
	}
	for _, c := range cases {
		if got := Deeper([]byte(c.data), c.max); got != c.want {
			t.Errorf("Deeper(%s, %d) = %v, want %v", c.data, c.max, got, c.want)
		}
	}
}

package jsonstr

import "testing"

func TestMarshalNoEscape(t *testing.T) {
	b, err := MarshalNoEscape(map[string]string{"u": "https://h/?a=<b>&c"})
	if err != nil || string(b) != `{"u":"https://h/?a=<b>&c"}` {
		t.Fatalf("%s %v", b, err)
	}
}

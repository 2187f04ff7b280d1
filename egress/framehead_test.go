package egress

import (
	"encoding/json"
	"testing"
)

// frameHead.decode must give what json.Unmarshal gives, for any input.
func checkFrameHead(t *testing.T, data []byte) {
	t.Helper()
	want := frameHead{Sequence: noSequence}
	werr := json.Unmarshal(data, &want)
	var got frameHead
	gerr := got.decode(data)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: error %v, json.Unmarshal %v", data, gerr, werr)
	}
	if werr == nil && got != want {
		t.Fatalf("%q: %+v, json.Unmarshal %+v", data, got, want)
	}
}

var frameHeadSeeds = []string{
	`{"sequence":3,"is_final":true,"response_kind":"e2a.complete"}`,
	` { "request_id" : "a\"b" , "sequence" : 12 , "body":{"x":[1,{"sequence":9}],"s":"}]\\"},"is_final":false,"response_kind":"e2a.chunk"} `,
	`{"body":{"sequence":5}}`,
	`{"sequence":1.5}`,
	`{"sequence":null,"is_final":null,"response_kind":null}`,
	`{"Sequence":4,"IS_FINAL":true,"Response_Kind":"k"}`,
	`{"sequence":1,"sequence":2}`,
	`{"response_kind":"a\u0041"}`,
	`{"seq\u0075ence":7}`,
	`{"sequence":-1e3}`,
	`{"is_final":true,"metadata":{"a":[true,false,null,-0.5e-3]},"response_kind":""}`,
	`null`,
	`[]`,
	`"x"`,
	`{`,
	`{"sequence":1,}`,
	`not json`,
	``,
	`{}`,
	`{"sequence":9223372036854775807}`,
	`{"sequence":9223372036854775808}`,
}

func TestFrameHeadDecode(t *testing.T) {
	for _, s := range frameHeadSeeds {
		checkFrameHead(t, []byte(s))
	}
}

func FuzzFrameHeadDecode(f *testing.F) {
	for _, s := range frameHeadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFrameHead(t, data) })
}

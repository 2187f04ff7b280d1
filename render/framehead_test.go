package render

import (
	"encoding/json"
	"reflect"
	"testing"
)

// frameHead is what Head reads, as json.Unmarshal reads it.
type frameHead struct {
	Sequence     int64  `json:"sequence"`
	IsFinal      bool   `json:"is_final"`
	ResponseKind string `json:"response_kind"`
}

// Head.Decode must give what json.Unmarshal gives, for any input.
func checkFrameHead(t *testing.T, data []byte) {
	t.Helper()
	want := frameHead{Sequence: NoSequence}
	werr := json.Unmarshal(data, &want)
	var got Head
	gerr := got.Decode(data)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: error %v, json.Unmarshal %v", data, gerr, werr)
	}
	if g := (frameHead{got.Sequence, got.IsFinal, got.ResponseKind}); werr == nil && g != want {
		t.Fatalf("%q: %+v, json.Unmarshal %+v", data, g, want)
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
	"{\"sequence\":1,\"is_final\":true,\"response_kind\":\"\x89\"}",
	// Keys encoding/json folds to a field though their length differs: "ſ"
	// (U+017F) matches "s", the Kelvin sign (U+212A) "k".
	`{"sequence":2,"ſequence":4}`,
	`{"is_final":false,"reſponse_kind":"e2a.complete"}`,
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

// textFrame.scan must give what json.Unmarshal into textFrame gives
// whenever it answers (the text path reads llm_response_id alone of the
// metadata).
func checkTextFrameScan(t *testing.T, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		return // the reader refuses invalid frames before any renderer
	}
	// The head scan's textFrame, when it gives one, is the scan's.
	var head Head
	fromHead, headOK := textFrame{}, false
	if head.Decode(data) == nil {
		fromHead, headOK = head.text.textFrame()
	}
	var got textFrame
	if !got.scan(data) {
		if headOK {
			t.Fatalf("%q: the head scan gave %+v, the scan declined", data, fromHead)
		}
		return
	}
	if headOK && !reflect.DeepEqual(fromHead, got) {
		t.Fatalf("%q: head scan %+v, scan %+v", data, fromHead, got)
	}
	var want textFrame
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: scanned, json.Unmarshal: %v", data, err)
	}
	gm, wm := got.Metadata, want.Metadata
	got.Metadata, want.Metadata = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %+v, json.Unmarshal %+v", data, got, want)
	}
	if (gm == nil) != (wm == nil) || string(gm[metaLLMResponseID]) != string(wm[metaLLMResponseID]) {
		t.Fatalf("%q: metadata %v, json.Unmarshal %v", data, gm, wm)
	}
	if _, ok := wm[metaLLMResponseID]; ok != (gm[metaLLMResponseID] != nil) {
		t.Fatalf("%q: llm_response_id presence differs", data)
	}
}

var textFrameSeeds = []string{
	`{"response_id":"r1","request_id":"q","sequence":2,"is_final":false,"response_kind":"e2a.chunk","task_id":"t","context_id":"c","session_id":"s","body":{"delta_kind":"text","delta":"héllo"},"metadata":{"llm_response_id":"L"}}`,
	`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"a\"b\\c\u00e9"}}`,
	`{"Response_Kind":"e2a.chunk","body":{"Delta":"x"}}`,
	`{"body":null,"metadata":null,"task_id":null}`,
	`{"body":{"delta":null},"metadata":{"llm_response_id":null}}`,
	`{"metadata":{"llm_response_id":"a"},"metadata":{"other":1}}`,
	`{"body":{"delta_kind":"text"},"body":{"delta":"y"}}`,
	`{"task_id":5}`,
	`{"is_final":"true"}`,
	`{"metadata":{"LLM_response_id":"x"}}`,
	`{"re\u0073ponse_id":"r"}`,
	"{\"request_id\":\"\xff\"}",
	`{"body":{"delta":{"nested":["}",{"a":"\""}]}},"response_kind":"e2a.chunk"}`,
	`[]`, `null`, `{}`,
	`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"x"},"tasK_id":"t"}`,
	`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"x"},"metadata":{"llm_reſponse_id":"L"}}`,
}

func TestTextFrameScan(t *testing.T) {
	for _, s := range textFrameSeeds {
		checkTextFrameScan(t, []byte(s))
	}
	var tf textFrame
	if !tf.scan([]byte(textFrameSeeds[0])) || tf.Body.DeltaKind != "text" || string(tf.Body.Delta) != `"héllo"` || tf.TaskID != "t" {
		t.Fatalf("the plain frame was not scanned: %+v", tf)
	}
}

func FuzzTextFrameScan(f *testing.F) {
	for _, s := range append(textFrameSeeds, frameHeadSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkTextFrameScan(t, data) })
}

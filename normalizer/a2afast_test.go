package normalizer

import (
	"reflect"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// checkA2ASendFast: where readA2ASendFast reads params, it gives what
// e2a.DecodeStrict gives (and e2a.DecodeStrict accepts them).
func checkA2ASendFast(t *testing.T, params []byte) (fast bool) {
	t.Helper()
	var got a2aSendParamsWire
	if !readA2ASendFast(params, &got) {
		return false
	}
	var want a2aSendParamsWire
	if err := e2a.DecodeStrict(params, &want); err != nil {
		t.Fatalf("fast path read %q, e2a.DecodeStrict refuses it: %v", params, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("params %q:\nfast    %#v\ngeneral %#v", params, got, want)
	}
	if got.Message != nil && !reflect.DeepEqual(*got.Message, *want.Message) || got.Config != nil && !reflect.DeepEqual(*got.Config, *want.Config) {
		t.Fatalf("params %q: members differ", params)
	}
	return true
}

var a2aSendCases = []struct {
	params string
	fast   bool
}{
	{`{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hello"}]},"metadata":{"n":1.50,"big":12345678901234567890}}`, true},
	{`{"message":{"messageId":"m-1","contextId":"c","taskId":"t","role":"agent","parts":[{"kind":"data","data":{"x":[1,2,{"y":null}]}},{"kind":"file","file":{"uri":"https://x/y"}}],"metadata":{},"extensions":["e1"],"referenceTaskIds":["t0","t1"]},"configuration":{"acceptedOutputModes":["text/plain"],"blocking":false,"historyLength":3}}`, true},
	{`{ "message" : { "messageId" : "m\u00e9" , "parts" : [ ] } , "unknown" : [1,{"a":2}] } `, true},
	{` {"message":{}}`, false}, // params as rpcRequest holds them start with their first byte
	{`{"message":{"messageId":"\ud800x","role":"user","parts":[{"text":"\u0000\"\\"}]}}`, true},
	{`{"message":{},"configuration":{},"metadata":{}}`, true},
	{`{}`, true},
	{`{"message":{"messageId":"a"},"Message":{"role":"user"}}`, false},                                       // folded key: encoding/json merges
	{`{"message":{"messageId":"a"},"message":{"role":"user"}}`, false},                                       // repeated: merged
	{`{"message":{"messageId":"a","MessageId":"b"}}`, false},                                                 // folded inside
	{`{"message":null}`, false},                                                                              // null
	{`{"message":{"messageId":null}}`, false},                                                                // null
	{`{"message":{"messageId":5}}`, false},                                                                   // a type error, the general path's
	{`{"configuration":{"pushNotificationConfig":{"url":"https://x"}}}`, false},                              // not read fast
	{`{"configuration":{"historyLength":1.0}}`, false},                                                       // not an int
	{`{"configuration":{"historyLength":99999999999999999999}}`, false},                                      // out of range
	{`{"configuration":{"historyLength":-2,"blocking":true,"acceptedOutputModes":[]}}`, true},                // read; a2aSend refuses -2
	{`{"message":{"extensions":["a",1]}}`, false},                                                            // not strings
	{`{"message":{"parts":{}}}`, false},                                                                      // not an array
	{`{"me\u0073sage":{"messageId":"a"}}`, false},                                                            // an escaped key
	{`{"message":{"messageId":"a"}} x`, false},                                                               // trailing data
	{`{"message":{"messageId":"a"`, false},                                                                   // invalid
	{`[]`, false},                                                                                            // not an object
	{`{"metadata":{"a":1,"a":{"b":2}},"message":{"metadata":{"k":"v","k":"w"},"parts":[[],"",true]}}`, true}, // free-form: the last wins
}

func TestA2ASendFastMatches(t *testing.T) {
	for _, c := range a2aSendCases {
		if got := checkA2ASendFast(t, []byte(c.params)); got != c.fast {
			t.Errorf("%s: read fast %v, want %v", c.params, got, c.fast)
		}
	}
}

// FuzzA2ASendFast: readA2ASendFast answers as e2a.DecodeStrict does, or leaves
// the params to it.
func FuzzA2ASendFast(f *testing.F) {
	for _, c := range a2aSendCases {
		f.Add([]byte(c.params))
	}
	f.Fuzz(func(t *testing.T, params []byte) { checkA2ASendFast(t, params) })
}

func TestA2ASendFastAllocs(t *testing.T) {
	params := []byte(`{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hello"}]},"metadata":{"bench":"x"}}`)
	var p a2aSendParamsWire
	fast := testing.AllocsPerRun(100, func() { readA2ASendFast(params, &p) })
	general := testing.AllocsPerRun(100, func() { p = a2aSendParamsWire{}; _ = e2a.DecodeStrict(params, &p) })
	if fast >= general {
		t.Errorf("fast path %v allocations, general %v", fast, general)
	}
	t.Logf("allocations: fast %v, general %v", fast, general)
}

package e2a

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fromJSONSeeds are envelopes of every shape the fast path reads or declines:
// the pipeline's own, members of every type, duplicates, escaped and
// case-folded keys, null members, free-form objects of every JSON type.
var fromJSONSeeds = []string{
	`{}`, `[]`, `null`, `"x"`, `{"a":1}x`, `{"request_id":"r"`,
	`{"protocol_version":"1.0","request_id":"01a2155a-c628-78c3","jsonrpc_id":"req-1","task_id":"t","context_id":"c",` +
		`"channel":"http","method":"message/stream","message_id":"m-1","is_stream":true,"timestamp":"2026-11-26T00:56:40.232415+00:00",` +
		`"identity_origin":"user","user_id":"anonymous","params":{"text":"bench","frames":8,"frame_bytes":100,"delay_ms":0},` +
		`"provenance":{"source_protocol":"a2a","converter":"e2a-pipeline/normalizer/a2a","converted_at":"2026-11-26T00:56:40.232415+00:00",` +
		`"details":{"context_created":true,"jsonrpc_method":"message/stream","op":"submit","task_created":true}},` +
		`"channel_context":{"a2a_request_metadata":{"frames":2}}}`,
	`{"params":{"a":[1,2.5,-3e9,{"b":null}],"c":[],"d":{},"e":"é\u00e9\n","f":false,"g":123456789012345678901234567890}}`,
	`{"params":{"a":1,"a":2}}`, `{"params":{"\u0061":1}}`, "{\"params\":{\"k\":\"\xff\"}}",
	`{"request_id":"a","request_id":"b"}`, `{"re\u0071uest_id":"x"}`, `{"unknown":1,"unknown":2,"method":"m"}`,
	`{"request_id":12345678901234567890}`, `{"jsonrpc_id":null}`, `{"jsonrpc_id":"<&>"}`, `{"jsonrpc_id":[1]}`,
	`{"timestamp":1774524781.15}`, `{"timestamp":"1e9"}`, `{"timestamp":true}`, `{"is_stream":"yes"}`,
	`{"params":[1]}`, `{"params":"x"}`, `{"params":null}`, `{"channel_context":{},"metadata":{"k":"v"}}`,
	`{"metadata":{"k":"v"},"channel_id":"c","req_method":"m","binding":{"a":[1]},"payload":{"x":1,"text":"p"},"params":{"text":"t"}}`,
	`{"provenance":null}`, `{"provenance":{}}`, `{"provenance":{"details":null}}`, `{"provenance":{"details":[1]}}`,
	`{"provenance":{"Source_Protocol":"x"}}`, `{"provenance":{"source_protocol":"a","source_protocol":"b"}}`,
	`{"provenance":{"converter":null,"x":1}}`, `{"provenance":{"converter":"a\"b"}}`, `{"provenance":"x"}`,
	`{"provenance":{"details":{"pool":"demo","worker":"w","n":1.50}}}`,
	`{"auth":{"extra_headers":{"a":"b"}},"trace":{"traceparent":"00-x"},"expected_output_modes":["text/plain"],"deadline":"2026-01-01T00:00:00Z"}`,
	` { "method" : "m" , "params" : { "x" : [ 1 , { } ] } } `,
}

// TestFromJSONFastMatches: FromJSON answers the same with and without its
// fast path, for the seeds and the golden envelopes.
func TestFromJSONFastMatches(t *testing.T) {
	inputs := append([]string(nil), fromJSONSeeds...)
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.in.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	if len(files) == 0 {
		t.Fatal("no golden envelopes")
	}
	fast := 0
	for _, in := range inputs {
		checkFromJSONFast(t, []byte(in))
		if _, ok, _ := fromJSONFast([]byte(in)); ok {
			fast++
		}
	}
	if fast < len(inputs)/2 {
		t.Errorf("the fast path read %d inputs of %d", fast, len(inputs))
	}
}

func FuzzFromJSONFast(f *testing.F) {
	for _, s := range fromJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFromJSONFast(t, data) })
}

// checkFromJSONFast compares FromJSON with the fast path on and off.
func checkFromJSONFast(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := FromJSON(data)
	fastRead = false
	want, werr := FromJSON(data)
	fastRead = true
	if (gerr == nil) != (werr == nil) ||
		errors.Is(gerr, ErrInvalidJSON) != errors.Is(werr, ErrInvalidJSON) ||
		errors.Is(gerr, ErrInvalidEnvelope) != errors.Is(werr, ErrInvalidEnvelope) {
		t.Fatalf("%q:\nfast: %v\ngeneral: %v", data, gerr, werr)
	}
	if werr != nil {
		// Same sentinel; the messages may name different fields when
		// several are bad (the general path reads them in map order).
		return
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("%q:\nfast:    %s\ngeneral: %s", data, g, w)
	}
}

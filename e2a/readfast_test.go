package e2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
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
	// wrong JSON types, refused alike on both paths; leap seconds
	`{"request_id":42}`, `{"request_id":-1.5e3}`, `{"is_stream":1}`, `{"expected_output_modes":["a",null]}`,
	`{"session_id":7,"task_id":true}`, `{"timestamp":"2016-12-31T23:59:60Z","deadline":"1990-12-31T15:59:60-08:00"}`,
	`{"deadline":"2016-12-31T12:30:60Z"}`, `{"deadline":"2016-12-31t23:59:60z"}`,
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
	checkAll(t, inputs, checkFromJSONFast, func(in []byte) bool { _, ok, _ := fromJSONFast(in); return ok }, 2)
}

// goldenFrames are the lines of the golden frame files.
func goldenFrames(t *testing.T) [][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.ndjson"))
	if len(files) == 0 {
		t.Fatal("no golden frames")
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				out = append(out, line)
			}
		}
	}
	return out
}

// fuzzSeeds fuzzes check from seeds.
func fuzzSeeds(f *testing.F, seeds []string, check func(*testing.T, []byte)) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(check)
}

// bothWays runs read with the fast paths on, then off.
func bothWays[T any](read func() (T, error)) (fast T, ferr error, general T, gerr error) {
	fast, ferr = read()
	fastRead = false
	defer func() { fastRead = true }()
	general, gerr = read()
	return fast, ferr, general, gerr
}

// checkAll runs check on every input and fails unless at least 1/share of
// them took the fast path (fast tells), so that the comparison covers it.
func checkAll(t *testing.T, inputs []string, check func(*testing.T, []byte), fast func([]byte) bool, share int) {
	t.Helper()
	n := 0
	for _, in := range inputs {
		check(t, []byte(in))
		if fast([]byte(in)) {
			n++
		}
	}
	if n < len(inputs)/share {
		t.Errorf("the fast path read %d inputs of %d", n, len(inputs))
	}
}

func FuzzFromJSONFast(f *testing.F) { fuzzSeeds(f, fromJSONSeeds, checkFromJSONFast) }

// checkFromJSONFast compares FromJSON with the fast path on and off.
func checkFromJSONFast(t *testing.T, data []byte) {
	t.Helper()
	got, gerr, want, werr := bothWays(func() (*Envelope, error) { return FromJSON(data) })
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

// responseSeeds are frames of every shape UnmarshalResponse reads or
// declines.
var responseSeeds = []string{
	`{}`, `null`, `[]`, `{"sequence":1.5}`, `{"sequence":"1"}`, `{"sequence":99999999999999999999}`, `{"sequence":-0}`,
	`{"protocol_version":"1.0","response_id":"01a2","request_id":"r","sequence":3,"is_final":true,"status":"succeeded",` +
		`"response_kind":"e2a.complete","timestamp":"2026-11-26T00:56:40.234906+00:00","provenance":{"source_protocol":"e2a",` +
		`"converter":"agent","details":{"pool":"demo","worker":"w","n":2}},"body":{"result":{"content":"x","n":1e2}},` +
		`"identity_origin":"agent","channel":"http","user_id":"anonymous","task_id":"t","context_id":"c","jsonrpc_id":"req-1"}`,
	`{"body":{"delta_kind":"text","delta":"hé\nllo"} , "jsonrpc_id": 7 ,"is_stream":false}`,
	`{"Body":{}}`, `{"status":"a","status":"b"}`, `{"status":null}`, `{"status":7}`, `{"is_final":1}`,
	`{"provenance":null}`, `{"provenance":{"Converter":"x"}}`, `{"provenance":{"details":{"a":[1,{"b":1e400}]}}}`,
	`{"metadata":{"a":1,"a":2.5,"b":[true,null,"\u00e9"]},"projections":{},"channel_context":{"x":{}},"a2a_metadata":{"k":-1e-7},"acp_meta":{"z":0}}`,
	`{"metadata":[1]}`, `{"unknown":{"sequence":"x"},"sequence":2}`, "{\"task_id\":\"\xff\"}", `{"task_id":"a\u0041"}`,
}

// TestUnmarshalResponseMatches: UnmarshalResponse gives what json.Unmarshal
// gives, for the seeds and the golden frames.
func TestUnmarshalResponseMatches(t *testing.T) {
	inputs := append([]string(nil), responseSeeds...)
	for _, line := range goldenFrames(t) {
		inputs = append(inputs, string(line))
	}
	checkAll(t, inputs, checkUnmarshalResponse, func(in []byte) bool { var r Response; return jsonstr.Valid(in) && r.scan(in) }, 3)
}

func FuzzUnmarshalResponse(f *testing.F) { fuzzSeeds(f, responseSeeds, checkUnmarshalResponse) }

func checkUnmarshalResponse(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := UnmarshalResponse(data)
	var want Response
	werr := json.Unmarshal(data, &want)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: UnmarshalResponse: %v, json.Unmarshal: %v", data, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(*got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("%q:\nscan:      %s\nUnmarshal: %s", data, g, w)
	}
}

// completeSeeds are e2a.complete bodies of every shape completeFast reads or
// declines.
var completeSeeds = []string{
	`{"result":{"content":"x","n":1e2,"parts":[{"kind":"text","text":"hé"},null,true]}}`, `{"result":null}`, `{}`,
	`{"result":"a\u00e9\n"}`, `{"result":-0.5e-3}`, `{"other":1,"result":[]}`, `{"result":1,"result":2}`,
	`{"Result":1}`, `{"RESULT":{}}`, `{"re\u0073ult":1}`, `null`, `[]`, `"x"`, `{"result":1`, `{"result":1}x`,
	"{\"result\":\"\xff\"}", ` { "result" : { "a" : [ 1 , { } ] } } `, `{"result":{"a":1,"a":2}}`,
	`{"result":123456789012345678901234567890}`, `{"result":{"\u0061":1}}`,
}

// TestCompleteFastMatches: Complete answers the same with and without its
// fast path, for the seeds and the golden frames' e2a.complete bodies.
func TestCompleteFastMatches(t *testing.T) {
	inputs := append([]string(nil), completeSeeds...)
	for _, line := range goldenFrames(t) {
		if r, err := UnmarshalResponse(line); err == nil && r.ResponseKind == KindComplete {
			inputs = append(inputs, string(r.Body))
		}
	}
	checkAll(t, inputs, checkComplete, func(in []byte) bool { _, ok := completeFast(in); return ok }, 2)
}

func FuzzComplete(f *testing.F) { fuzzSeeds(f, completeSeeds, checkComplete) }

// checkComplete compares Complete of a frame with body with the fast path
// on and off.
func checkComplete(t *testing.T, body []byte) {
	t.Helper()
	r := &Response{ResponseKind: KindComplete, Body: body}
	got, gerr, want, werr := bothWays(r.Complete)
	if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nfast:    %#v %v\ngeneral: %#v %v", body, got, gerr, want, werr)
	}
}

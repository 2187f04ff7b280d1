package e2a_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// benchEnvelope is an A2A message/stream request as the normalizer writes it.
var benchEnvelope = []byte(`{"protocol_version":"1.0","request_id":"id-0002","jsonrpc_id":"req-002","correlation_id":"inv-002",` +
	`"task_id":"id-0001","context_id":"ctx-001","channel":"a2a","method":"message/stream","message_id":"msg-002",` +
	`"is_stream":true,"timestamp":"2026-03-30T10:00:00+00:00","identity_origin":"user","user_id":"user_12345",` +
	`"params":{"blocking":false,"history_length":10,"text":"What's the weather in Beijing?"},` +
	`"provenance":{"source_protocol":"a2a","converter":"e2a-pipeline/normalizer/a2a","converted_at":"2026-03-30T10:00:00+00:00",` +
	`"details":{"interaction_spec_version":"0.1","jsonrpc_method":"message/stream","op":"submit","task_created":true}},` +
	`"expected_output_modes":["text/plain","application/json"],` +
	`"a2a_metadata":{"interaction_spec_version":"0.1","invocation_id":"inv-002","user_id":"user_12345"}}`)

func BenchmarkFromJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e2a.FromJSON(benchEnvelope); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlainStringsReadAsUnmarshal: the fast paths for plain strings (request
// ids, times, JSON-RPC ids) give what json.Unmarshal and json.Marshal give.
func TestPlainStringsReadAsUnmarshal(t *testing.T) {
	for _, s := range []string{`"abc"`, `""`, `"a\"b"`, `"a\\b"`, `"é"`, "\"\xff\"", "\"a\tb\"", `"a<b>&c"`, "\"\u2028\"",
		`"\u00e9"`, `" spaced "`, `"2026-03-30T10:00:00+00:00"`, `"1700000000"`, `"NaN"`, `"inf"`} {
		env := []byte(`{"request_id":` + s + `,"task_id":` + s + `,"jsonrpc_id":` + s + `,"timestamp":` + s + `}`)
		got, err := e2a.FromJSON(env)
		var want struct {
			RequestID string `json:"request_id"`
			TaskID    string `json:"task_id"`
		}
		if jerr := json.Unmarshal(env, &want); jerr != nil {
			if err == nil {
				t.Errorf("%s: accepted, json.Unmarshal refuses: %v", s, jerr)
			}
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "timestamp") {
				t.Errorf("%s: %v", s, err)
			}
			continue
		}
		if got.RequestID != want.RequestID || got.TaskID != want.TaskID {
			t.Errorf("%s: read %q %q, want %q %q", s, got.RequestID, got.TaskID, want.RequestID, want.TaskID)
		}
		if wantID, _ := json.Marshal(want.TaskID); string(got.JSONRPCID) != string(wantID) {
			t.Errorf("%s: jsonrpc_id %s, want %s", s, got.JSONRPCID, wantID)
		}
	}
}

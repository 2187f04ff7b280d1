package e2a_test

import (
	"net/http"
	"strings"
	"testing"

	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
)

// TestFrontDoorFieldTypes: every member of the envelope (spec §4, the
// pipeline's deadline and trace, the §9 compatibility keys) given a JSON
// type its row does not allow is refused 400 invalid_request, the message
// naming the field, with nothing published: never coerced (request_id 42
// was published as "42"), dropped, or a 500. Each row's good values are
// accepted (202), null included (absent).
func TestFrontDoorFieldTypes(t *testing.T) {
	const (
		str   = `"x"`
		num   = `42`
		float = `1.5`
		boolV = `true`
		obj   = `{}`
		arr   = `[]`
	)
	for _, tc := range []struct {
		field string
		good  []string
		bad   []string
	}{
		{"protocol_version", []string{`"1.0"`}, []string{num, boolV, obj, arr}},
		{"request_id", []string{`"r-42"`}, []string{num, `-7`, float, `12345678901234567890`, boolV, obj, arr}},
		{"jsonrpc_id", []string{str, num, float}, []string{boolV, obj, arr}},
		{"correlation_id", []string{str}, []string{num, boolV, obj, arr}},
		{"task_id", []string{`"t-42"`}, []string{num, boolV, obj, arr}},
		{"context_id", []string{str}, []string{num, boolV, obj, arr}},
		{"session_id", []string{`"s-42"`}, []string{num, boolV, obj, arr}},
		{"channel", []string{str}, []string{num, boolV, obj, arr}},
		{"method", []string{str}, []string{num, boolV, obj, arr}},
		{"message_id", []string{str}, []string{num, boolV, obj, arr}},
		{"is_stream", []string{boolV, `false`}, []string{`"true"`, `1`, `0`, obj, arr}},
		{"timestamp", []string{`"2026-03-28T12:00:00Z"`, num, `"1774524781"`}, []string{boolV, obj, arr, `"yesterday"`}},
		{"deadline", []string{`"2999-03-28T12:00:00Z"`}, []string{boolV, obj, arr, `"tomorrow"`}},
		{"identity_origin", []string{`"user"`}, []string{num, boolV, obj, arr}},
		{"user_id", []string{str}, []string{num, boolV, obj, arr}},
		{"source_agent_id", []string{str}, []string{num, boolV, obj, arr}},
		{"params", []string{obj, `{"n":1}`}, []string{str, num, boolV, arr}},
		{"provenance", []string{`{"source_protocol":"e2a"}`}, []string{str, num, arr, `{"source_protocol":1}`, `{"details":[]}`}},
		{"ext_method", []string{str}, []string{num, boolV, obj, arr}},
		{"session_update_kind", []string{str}, []string{num, boolV, obj, arr}},
		{"expected_output_modes", []string{`["text/plain"]`, arr}, []string{str, num, obj, `[1]`, `[null]`}},
		{"auth", []string{`{"method_id":"m"}`}, []string{str, num, arr, `{"method_id":1}`, `{"extra_headers":{"h":1}}`}},
		{"channel_context", []string{obj}, []string{str, num, boolV, arr}},
		{"a2a_metadata", []string{obj}, []string{str, num, boolV, arr}},
		{"acp_meta", []string{obj}, []string{str, num, boolV, arr}},
		{"trace", []string{obj}, []string{str, num, arr, `{"traceparent":1}`}},
		// §9 compatibility keys of a legacy AgentRequest.
		{"channel_id", []string{str}, []string{num, boolV, obj, arr}},
		{"req_method", []string{str}, []string{num, boolV, obj, arr}},
		{"metadata", []string{obj}, []string{str, num, boolV, arr}},
		{"payload", []string{obj}, []string{str, num, boolV, arr}},
	} {
		for _, v := range append(tc.good, "null") {
			h := newHost(nil)
			body := `{"` + tc.field + `":` + v + `}`
			if rec := post(h, "/v1/requests?agent=echo", body); rec.Code != http.StatusAccepted || len(h.Published()) != 1 {
				t.Errorf("%s: %d %s, want 202", body, rec.Code, rec.Body)
			}
		}
		for _, v := range tc.bad {
			h := newHost(nil)
			body := `{"` + tc.field + `":` + v + `}`
			rec := post(h, "/v1/requests?agent=echo", body)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400 naming the field", body, rec.Code, rec.Body)
				continue
			}
			if e := errorOf(t, rec); e.Code != e2aproto.CodeInvalidRequest || e.Retryable || !strings.Contains(e.Message, tc.field) {
				t.Errorf("%s: error %+v, want invalid_request naming %q", body, e, tc.field)
			}
			if n := len(h.Published()); n != 0 {
				t.Errorf("%s: %d envelopes published", body, n)
			}
		}
	}
}

// TestFrontDoorLeapSecond: RFC 3339 allows second 60 (a leap second,
// §5.6-§5.7), which Go's time.Parse refuses: a timestamp or deadline with
// one was refused 400. It is read as the next second (as most systems read
// it), stored in the form every stage parses; lower-case t/z and another
// offset (RFC 3339 §5.8's own example) too. Second 60 anywhere but at
// 23:59 UTC, where no leap second can be, stays refused with a message
// saying so.
func TestFrontDoorLeapSecond(t *testing.T) {
	for in, want := range map[string]string{
		"2016-12-31T23:59:60Z":        "2017-01-01T00:00:00+00:00",
		"2016-12-31t23:59:60z":        "2017-01-01T00:00:00+00:00",
		"2016-12-31T23:59:60.25Z":     "2017-01-01T00:00:00.250000+00:00",
		"1990-12-31T15:59:60-08:00":   "1991-01-01T00:00:00+00:00",
		"2999-06-30T23:59:60+00:00":   "2999-07-01T00:00:00+00:00",
		"1990-12-31T15:59:60.5-08:00": "1991-01-01T00:00:00.500000+00:00",
	} {
		h := newHost(nil)
		body := `{"timestamp":"` + in + `","deadline":"` + in + `"}`
		rec := post(h, "/v1/requests?agent=echo", body)
		if rec.Code != http.StatusAccepted || len(h.Published()) != 1 {
			t.Errorf("%s: %d %s, want 202", in, rec.Code, rec.Body)
			continue
		}
		if env := h.Published()[0]; env.Timestamp != want || env.Deadline != want {
			t.Errorf("%s: stored timestamp %q, deadline %q; want %q", in, env.Timestamp, env.Deadline, want)
		}
	}
	for in, msg := range map[string]string{
		"2016-12-31T12:30:60Z":      "leap second",
		"2016-12-31T23:59:60+01:00": "leap second",
		"2016-12-31t23:58:60z":      "leap second",
		"2016-12-31T23:59:61Z":      "RFC 3339",
	} {
		for _, field := range []string{"timestamp", "deadline"} {
			h := newHost(nil)
			rec := post(h, "/v1/requests?agent=echo", `{"`+field+`":"`+in+`"}`)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("%s %s: %d %s, want 400", field, in, rec.Code, rec.Body)
				continue
			}
			if e := errorOf(t, rec); e.Code != e2aproto.CodeInvalidRequest || !strings.Contains(e.Message, field) || !strings.Contains(e.Message, msg) {
				t.Errorf("%s %s: error %+v, want invalid_request naming the field and %q", field, in, e, msg)
			}
			if len(h.Published()) != 0 {
				t.Errorf("%s %s: published", field, in)
			}
		}
	}
}

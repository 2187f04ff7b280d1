package egress

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestResumePastFinal: a browser's EventSource reconnects after the stream
// of a finished request ends, with Last-Event-ID = the final frame's
// sequence. That resume point, and any later one, is answered 204 No
// Content, which stops EventSource; a resume at or before the final frame
// streams from there.
func TestResumePastFinal(t *testing.T) {
	e := startEnv(t)
	e.finished(t, "resume-past-1", 2) // frames 0, 1, 2 (final)
	s, err := New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mux := http.NewServeMux()
	s.Register(mux)
	cases := []struct {
		name, query, lastEventID, accept string
		status                           int
		events                           int
	}{
		{"Last-Event-ID of the final frame", "", "2", "text/event-stream", 204, 0},
		{"from past the final frame", "?from=3", "", "text/event-stream", 204, 0},
		{"far past", "?from=99", "", "text/event-stream", 204, 0},
		{"Last-Event-ID of the largest sequence", "", "9223372036854775807", "text/event-stream", 204, 0},
		{"from the largest sequence", "?from=9223372036854775807", "", "text/event-stream", 204, 0},
		{"NDJSON past the final frame", "?from=3", "", "application/x-ndjson", 204, 0},
		{"Last-Event-ID before the final frame", "", "1", "text/event-stream", 200, 1},
		{"from the final frame", "?from=2", "", "text/event-stream", 200, 1},
		{"from the start", "", "", "text/event-stream", 200, 3},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/requests/resume-past-1/stream"+c.query, nil)
		req.Header.Set("Accept", c.accept)
		if c.lastEventID != "" {
			req.Header.Set("Last-Event-ID", c.lastEventID)
		}
		mux.ServeHTTP(rec, req)
		events := strings.Count("\n"+rec.Body.String(), "\nid: ")
		if c.accept == "application/x-ndjson" {
			events = strings.Count(rec.Body.String(), `"sequence"`)
		}
		if rec.Code != c.status || events != c.events || (c.status == 204 && rec.Body.Len() != 0) {
			t.Errorf("%s: %d with %d events, want %d with %d: %q", c.name, rec.Code, events, c.status, c.events, rec.Body.String())
		}
	}
}

// TestResumePoint: the sequence after Last-Event-ID, else ?from=, else 0;
// never negative, the largest Last-Event-ID included (no sequence follows
// it: it resumes past any final frame); a malformed value is a bad
// request.
func TestResumePoint(t *testing.T) {
	for _, c := range []struct {
		lastEventID, from string
		want              int64
		bad               bool
	}{
		{"", "", 0, false},
		{"2", "", 3, false},
		{" 2 ", "", 3, false},
		{"-1", "", 0, false}, // before frame 0
		{"2", "7", 3, false}, // Last-Event-ID wins
		{"", "7", 7, false},
		{"9223372036854775806", "", math.MaxInt64, false},
		{"9223372036854775807", "", math.MaxInt64, false},
		{"", "9223372036854775807", math.MaxInt64, false},
		{"9223372036854775808", "", 0, true},
		{"-2", "", 0, true},
		{"x", "", 0, true},
		{"", "-1", 0, true},
	} {
		r := httptest.NewRequest("GET", "/v1/requests/x/stream?from="+c.from, nil)
		if c.from == "" {
			r.URL.RawQuery = ""
		}
		if c.lastEventID != "" {
			r.Header.Set("Last-Event-ID", c.lastEventID)
		}
		got, err := ResumePoint(r)
		if c.bad {
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("Last-Event-ID %q, from %q: %d, %v; want a bad request", c.lastEventID, c.from, got, err)
			}
			// The log keeps the package; the client reads which value and
			// what it must be.
			if m := ClientMessage(err); !strings.HasPrefix(err.Error(), "egress: bad request: ") ||
				strings.Contains(m, "egress") || !strings.Contains(m, "must be") || !strings.Contains(m, strconv.Quote(c.lastEventID+c.from)) {
				t.Errorf("Last-Event-ID %q, from %q: %q, client reads %q", c.lastEventID, c.from, err, m)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Last-Event-ID %q, from %q: %d, %v; want %d", c.lastEventID, c.from, got, err, c.want)
		}
	}
}

// TestNonJSONEnvelopeStaysValidJSON: an integrator published a payload that
// is not JSON on a request subject; GET /v1/requests/{id} still answers
// valid JSON, with the payload as a JSON string.
func TestNonJSONEnvelopeStaysValidJSON(t *testing.T) {
	h := startHTTP(t)
	subj, err := subjects.Request("demo", "raw-1")
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(subj)
	msg.Data = []byte("hello world\n\"quoted\" \xff")
	msg.Header.Set(subjects.HeaderMsgID, "raw-1")
	if _, err := h.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	resp := h.get(t, "/v1/requests/raw-1")
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		Envelope string `json:"envelope"`
		State    string `json:"state"`
	}
	if resp.StatusCode != 202 || !json.Valid(b) || json.Unmarshal(b, &v) != nil ||
		!strings.HasPrefix(v.Envelope, "hello world\n\"quoted\"") || v.State != StatePending {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestRedactFrames: streams served under RedactFrames (the console's) have
// every secret-named value replaced, counts such as max_tokens kept; API
// clients get the frames as stored.
func TestRedactFrames(t *testing.T) {
	e := startEnv(t)
	env := newEnvelope("redact-1")
	e.submit(t, env)
	w := e.writer(t, env)
	w.complete(map[string]any{"answer": "ok", "api_key": "sk-live-0123456789", "nested": map[string]any{"session_token": "st-42", "max_tokens": 7}})
	s, err := New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mux := http.NewServeMux()
	s.Register(mux)
	for _, redacted := range []bool{true, false} {
		for _, accept := range []string{"text/event-stream", "application/x-ndjson"} {
			req := httptest.NewRequest("GET", "/v1/requests/redact-1/stream", nil)
			req.Header.Set("Accept", accept)
			if redacted {
				req = req.WithContext(RedactFrames(req.Context()))
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			body := rec.Body.String()
			leaked := strings.Contains(body, "sk-live-0123456789") || strings.Contains(body, "st-42")
			if rec.Code != 200 || leaked == redacted || !strings.Contains(body, `"max_tokens":7`) || !strings.Contains(body, `"answer":"ok"`) ||
				(redacted && !strings.Contains(body, `"[redacted]"`)) || !strings.Contains(body, `"is_final":true`) {
				t.Errorf("redacted=%v %s: %d %s", redacted, accept, rec.Code, body)
			}
		}
	}
}

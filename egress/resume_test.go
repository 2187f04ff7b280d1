package egress

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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

package egress

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// A malformed Last-Event-ID or ?from= is the client's mistake: answered
// 400, and logged below ERROR.
func TestBadResumePointIsNotAnError(t *testing.T) {
	e := startEnv(t)
	e.finished(t, "resume-1", 2)
	var logs testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(e.nc, WithLogger(log), WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct{ path, lastEventID string }{
		{"/v1/requests/resume-1/stream", "abc"},
		{"/v1/requests/resume-1/stream", "-5"},
		{"/v1/requests/resume-1/stream?from=x", ""},
		{"/v1/requests/resume-1/stream?from=-1", ""},
		{"/v1/requests/resume-1?from=zz", ""},
	} {
		for _, accept := range []string{"text/event-stream", "application/x-ndjson", ""} {
			req, _ := http.NewRequest("GET", srv.URL+c.path, nil)
			if c.lastEventID != "" {
				req.Header.Set("Last-Event-ID", c.lastEventID)
			}
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s Last-Event-ID %q Accept %q: %d, want 400", c.path, c.lastEventID, accept, resp.StatusCode)
			}
		}
	}
	debug := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Level == "ERROR" || rec.Level == "WARN" {
			t.Errorf("logged at %s: %s", rec.Level, line)
		}
		if rec.Level == "DEBUG" && strings.Contains(line, "must be a frame sequence") {
			debug++
		}
	}
	if debug != 15 {
		t.Errorf("%d debug lines about the bad values, want 15:\n%s", debug, logs.String())
	}
}

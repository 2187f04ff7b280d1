package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestLoggerRedactsSecrets(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x", "authorization", "Bearer s3cr3t", "bearer_token", "s3cr3t2", "api_key_ref", "vault:k1", "request_id", "r1")
	out := buf.String()
	for _, s := range []string{"s3cr3t", "s3cr3t2"} {
		if strings.Contains(out, s) {
			t.Fatalf("secret %q logged: %s", s, out)
		}
	}
	if !strings.Contains(out, "vault:k1") || !strings.Contains(out, `"request_id":"r1"`) {
		t.Fatalf("non-secret attributes lost: %s", out)
	}
	buf.Reset()
	log.Info("x", "retry_window", 24*time.Hour, slog.Group("g", "wait", 1500*time.Millisecond))
	if out := buf.String(); !strings.Contains(out, `"retry_window":"24h0m0s"`) || !strings.Contains(out, `"g":{"wait":"1.5s"}`) {
		t.Fatalf("durations not written as Go durations: %s", out)
	}
	if _, err := NewLogger(&buf, "xml", "info"); err == nil {
		t.Fatal("bad format accepted")
	}
	if _, err := NewLogger(&buf, "json", "loud"); err == nil {
		t.Fatal("bad level accepted")
	}
}

func TestReadyz(t *testing.T) {
	mux := http.NewServeMux()
	var fail, other error
	Register(mux, NewRegistry(), func(context.Context) error { return fail }, func(context.Context) error { return other })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz = %d", code)
	}
	fail = errors.New("nats: disconnected")
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "disconnected") {
		t.Fatalf("readyz = %d %s", code, body)
	}
	// JetStream unavailable (no quorum: the API's 503, 10008) is the
	// cluster's: 200 degraded, the gauge 1; with another failure, 503.
	noQuorum := jetStreamFailure(fmt.Errorf("stream E2A_REQUESTS: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008,
		Description: "JetStream system temporarily unavailable"}))
	fail = noQuorum
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, "10008") {
		t.Fatalf("readyz without quorum = %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\ne2a_jetstream_unavailable 1\n") {
		t.Fatalf("metrics without quorum: no e2a_jetstream_unavailable 1")
	}
	other = errors.New("nats: disconnected")
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"status":"unavailable"`) {
		t.Fatalf("readyz degraded and failing = %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\ne2a_jetstream_unavailable 0\n") {
		t.Fatalf("metrics while unready: no e2a_jetstream_unavailable 0")
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics = %d", code)
	}
}

func TestLoggerRedactsNestedSecrets(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, err := NewLogger(&buf, format, "debug")
		if err != nil {
			t.Fatal(err)
		}
		params := map[string]any{"text": "hi", "max_tokens": 10, "auth": map[string]any{"user": "s3cr3t-user"}, "list": []any{map[string]any{"api_key": "s3cr3t-key"}}}
		hdr := http.Header{"Authorization": {"Bearer s3cr3t-hdr"}, "Accept": {"text/plain"}}
		type cfg struct {
			Password string `json:"password"`
			Port     int    `json:"port"`
		}
		log.Info("x", "params", params, "header", hdr, "cfg", &cfg{Password: "s3cr3t-cfg", Port: 8080},
			slog.Group("auth", "user", "s3cr3t-group"), slog.Group("req", "session_token", "s3cr3t-st", "session_id", "sid-1"),
			"raw", json.RawMessage(`{"client_secret":"s3cr3t-raw"}`), "msg", "calling with Authorization: Bearer s3cr3t-inline",
			"token_count", 42, "credential_ref", "vault:k", "auth_enabled", true)
		out := buf.String()
		if strings.Contains(out, "s3cr3t") {
			t.Errorf("%s: secret logged: %s", format, out)
		}
		for _, keep := range []string{"max_tokens", "text/plain", "8080", "sid-1", "42", "vault:k", "true"} {
			if !strings.Contains(out, keep) {
				t.Errorf("%s: %q lost: %s", format, keep, out)
			}
		}
		if params["auth"].(map[string]any)["user"] != "s3cr3t-user" || hdr.Get("Authorization") != "Bearer s3cr3t-hdr" {
			t.Error("the caller's values were modified")
		}
	}
}

// TestCachedCheck: Cached asks its check at most once per TTL, however
// often /readyz is asked, and keeps no answer cut short by the caller's
// context.
func TestCachedCheck(t *testing.T) {
	calls := 0
	var fail error
	c := Cached(time.Hour, func(context.Context) error { calls++; return fail })
	for range 5 {
		if err := c(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	fail = errors.New("bucket E2A_TASKS: nats: stream not found")
	if err := c(context.Background()); err != nil || calls != 1 {
		t.Fatalf("within the TTL: err %v, %d calls (want the kept answer, 1 call)", err, calls)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	d := Cached(time.Hour, func(context.Context) error { calls++; return fail })
	if err := d(gone); err == nil {
		t.Fatal("the check's failure not returned")
	}
	if err := d(context.Background()); err == nil || calls != 3 {
		t.Fatalf("an answer cut short was kept: err %v, %d calls (want 3)", err, calls)
	}
}

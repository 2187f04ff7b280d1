package obs

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
	if _, err := NewLogger(&buf, "xml", "info"); err == nil {
		t.Fatal("bad format accepted")
	}
	if _, err := NewLogger(&buf, "json", "loud"); err == nil {
		t.Fatal("bad level accepted")
	}
}

func TestReadyz(t *testing.T) {
	mux := http.NewServeMux()
	var fail error
	Register(mux, NewRegistry(), func(context.Context) error { return fail })
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
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics = %d", code)
	}
}

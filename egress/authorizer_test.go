package egress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAuthorizerGuardsEndpoints(t *testing.T) {
	e := startEnv(t)
	e.finished(t, "auth-1", 2)
	s, err := New(e.nc, WithAuthorizer(func(r *http.Request) (string, error) {
		switch r.Header.Get("X-Api-Key") {
		case "good":
			return "", nil // trusted reader: no ownership check
		case "owner":
			return "u_001", nil
		case "other":
			return "u-2", nil
		}
		return "", errors.New("no")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mux := http.NewServeMux()
	s.Register(mux)
	for _, path := range []string{"/v1/requests/auth-1", "/v1/requests/auth-1/stream"} {
		for _, key := range []string{"", "bad"} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", path, nil)
			if key != "" {
				req.Header.Set("X-Api-Key", key)
			}
			mux.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("%s key %q: %d", path, key, rec.Code)
			}
		}
		for key, want := range map[string]int{"good": 200, "owner": 200, "other": 404} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("X-Api-Key", key)
			mux.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Fatalf("%s with key %q: %d %s, want %d", path, key, rec.Code, rec.Body, want)
			}
		}
	}
}

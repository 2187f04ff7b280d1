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
	s, err := New(e.nc, WithAuthorizer(func(r *http.Request) error {
		if r.Header.Get("X-Api-Key") != "good" {
			return errors.New("no")
		}
		return nil
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
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Api-Key", "good")
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s with a good key: %d %s", path, rec.Code, rec.Body)
		}
	}
}

package egress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/e2a-pipeline/pipeline/tenant"
)

func TestAuthorizerGuardsEndpoints(t *testing.T) {
	e := startEnv(t)
	e.finished(t, "auth-1", 2)
	s, err := New(e.nc, WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
		switch r.Header.Get("X-Api-Key") {
		case "open":
			return tenant.Principal{ID: "anonymous", Open: true}, nil // auth off: no ownership
		case "audit":
			return tenant.Principal{ID: "ops", Roles: []tenant.Role{tenant.RoleAudit}}, nil
		case "owner":
			return tenant.Principal{ID: "u_001"}, nil
		case "other":
			return tenant.Principal{ID: "u-2"}, nil
		case "prefix":
			return tenant.Principal{ID: "u_00"}, nil // byte-exact, not a prefix match
		}
		return tenant.Principal{}, errors.New("no")
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
		for key, want := range map[string]int{"open": 200, "audit": 200, "owner": 200, "other": 404, "prefix": 404} {
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

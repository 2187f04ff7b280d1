package oauthtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-oauth2/oauth2/v4"
	"github.com/go-oauth2/oauth2/v4/manage"
	"github.com/go-oauth2/oauth2/v4/models"
	"github.com/go-oauth2/oauth2/v4/server"
	"github.com/go-oauth2/oauth2/v4/store"

	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// TokenPath is where the server's token endpoint is.
const TokenPath = "/oauth/token"

// Server is an OAuth 2.0 authorization server of one client.
type Server struct {
	srv    *server.Server
	http   *httptest.Server
	issued atomic.Int64
	down   atomic.Bool
	busy   atomic.Pointer[string] // Retry-After of SetBusy's 429s
	last   atomic.Value           // the access token Valid accepted last
}

// Start serves an authorization server of the client id with secret,
// whose access tokens last exp (go-oauth2's client-credentials grant,
// client authentication by HTTP Basic or in the form, as RFC 6749 §2.3.1
// allows), until the test ends.
func Start(t testing.TB, id, secret string, exp time.Duration) *Server {
	t.Helper()
	m := manage.NewDefaultManager()
	m.SetClientTokenCfg(&manage.Config{AccessTokenExp: exp})
	m.MustTokenStorage(store.NewMemoryTokenStore())
	clients := store.NewClientStore()
	if err := clients.Set(id, &models.Client{ID: id, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	m.MapClientStorage(clients)
	s := &Server{srv: server.NewDefaultServer(m)}
	s.srv.SetAllowedGrantType(oauth2.ClientCredentials)
	s.srv.SetClientInfoHandler(func(r *http.Request) (string, string, error) {
		if id, secret, ok := r.BasicAuth(); ok {
			return id, secret, nil
		}
		return server.ClientFormHandler(r)
	})
	mux := http.NewServeMux()
	mux.HandleFunc(TokenPath, func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if after := s.busy.Load(); after != nil {
			w.Header().Set("Retry-After", *after)
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		rec := &obs.StatusWriter{ResponseWriter: w}
		_ = s.srv.HandleTokenRequest(rec, r)
		if rec.Code == http.StatusOK {
			s.issued.Add(1)
		}
	})
	s.http = httptest.NewServer(mux)
	t.Cleanup(s.http.Close)
	return s
}

// TokenURL is the token endpoint's URL.
func (s *Server) TokenURL() string { return s.http.URL + TokenPath }

// Issued is how many access tokens the server issued.
func (s *Server) Issued() int { return int(s.issued.Load()) }

// SetDown makes the token endpoint answer 503 (down) or serve again.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// SetBusy makes the token endpoint answer 429 with Retry-After after, or
// ("") serve again.
func (s *Server) SetBusy(after string) {
	if after == "" {
		s.busy.Store(nil)
		return
	}
	s.busy.Store(&after)
}

// Valid reports whether r carries a bearer token the server issued and
// that has not expired, and its scope.
func (s *Server) Valid(r *http.Request) (scope string, ok bool) {
	ti, err := s.srv.ValidationBearerToken(r)
	if err != nil {
		return "", false
	}
	s.last.Store(ti.GetAccess())
	return ti.GetScope(), true
}

// LastValid is the access token Valid accepted last ("" for none).
func (s *Server) LastValid() string {
	v, _ := s.last.Load().(string)
	return v
}

// Revoke ends the access token: calls carrying it are no longer Valid.
func (s *Server) Revoke(t testing.TB, access string) {
	t.Helper()
	if err := s.srv.Manager.RemoveAccessToken(context.Background(), access); err != nil {
		t.Fatal(err)
	}
}

// ValidHeader is Valid of a call with headers h (an A2A server's service
// parameters, gRPC metadata).
func (s *Server) ValidHeader(h http.Header) bool {
	_, ok := s.Valid(&http.Request{Method: http.MethodGet, URL: &url.URL{}, Header: h})
	return ok
}

// ScopedHeader is ValidHeader for tokens granted scope (among others):
// an A2A server's check of calls whose card requires that scope.
func (s *Server) ScopedHeader(scope string) func(http.Header) bool {
	return func(h http.Header) bool {
		granted, ok := s.Valid(&http.Request{Method: http.MethodGet, URL: &url.URL{}, Header: h})
		return ok && slices.Contains(strings.Fields(granted), scope)
	}
}

// Require serves next only calls with a valid token (Valid); others get
// 401 with a WWW-Authenticate challenge.
func (s *Server) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.Valid(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "invalid or expired token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

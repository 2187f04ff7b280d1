package push

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRedirectIsPermanent: a webhook that answers a redirect is refused
// for good, as a 4xx is: redirects are not followed (they would carry the
// update and its credentials elsewhere), so no retry can deliver it. It
// was retried for the whole retry window (24 h) before its dead letter.
// 408 and 429 stay transient, 5xx too. A 410 is also gone: its config
// is deleted (TestGoneEndsConfig).
func TestRedirectIsPermanent(t *testing.T) {
	o, err := buildOptions([]Option{WithAllowHosts("127.0.0.1")}) // the test's webhook: http on loopback
	if err != nil {
		t.Fatal(err)
	}
	for status, permanent := range map[int]bool{301: true, 302: true, 307: true, 308: true, 404: true, 410: true,
		408: false, 429: false, 500: false, 503: false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if status/100 == 3 {
				w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
			}
			w.WriteHeader(status)
		}))
		// The stage's client, but for its address policy (the test's
		// webhook is on loopback): redirects not followed.
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		a := postUpdate(context.Background(), client, o, Config{URL: srv.URL}, "e1", []byte(`{}`))
		srv.Close()
		if a.ok || a.permanent != permanent || a.status != status || a.gone != (status == http.StatusGone) {
			t.Errorf("status %d: attempt %+v, want permanent %v, gone for 410 only", status, a, permanent)
		}
	}
}

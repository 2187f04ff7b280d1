package pipetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
)

// ServeHistory starts egress on nc with h as its History (egress.WithHistory:
// internal/audit's Auditor, for a read API that answers the requests the
// hot streams dropped) and opts, and serves its E2A read API alone on a
// loopback HTTP server. The server, then the Service, are closed when the
// test ends.
func ServeHistory(t testing.TB, nc *nats.Conn, h egress.History, opts ...egress.Option) *httptest.Server {
	t.Helper()
	s, err := egress.New(nc, append([]egress.Option{egress.WithHistory(h)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return srv
}

// GetRequestView sends GET {url}/v1/requests/{id} (the aggregated JSON of
// the E2A read API, no credentials) and returns its status and its body
// decoded, with the decode's error; a request that cannot be sent fails the
// test.
func GetRequestView(t testing.TB, url, id string) (int, egress.RequestView, error) {
	t.Helper()
	resp, err := http.Get(url + "/v1/requests/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var view egress.RequestView
	err = json.NewDecoder(resp.Body).Decode(&view)
	return resp.StatusCode, view, err
}

package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// clientUpstream is an Upstream calling a real HTTP server through a
// Client (the way the bridges do): a POST, its error as Client.Do returns
// it, the Client as the Scrubber; it completes with "done", or with body
// the answer's JSON as written (what the HTTP agent bridge does with a
// JSON answer: a result the upstream wrote whole, which the Handler
// scrubs).
type clientUpstream struct {
	c    *Client
	url  string
	body bool
}

func (u *clientUpstream) Name() string          { return "test " + u.c.Name() }
func (u *clientUpstream) Scrub(s string) string { return u.c.Scrub(s) }
func (u *clientUpstream) Call(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	resp, err := u.c.Do(req, env)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !u.body {
		return w.Complete("done")
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return w.Complete(json.RawMessage(b))
}

// TestHeaderTokenScrubbed: a credential given as a header whose
// value carries an auth scheme (E2A_UPSTREAM_HEADERS="Authorization:
// Bearer <token>", which WithCredentials accepts when no API key is set,
// or "Authorization: Basic …") is a secret by its token: an upstream that
// refuses it quoting the token alone ("token … has expired", the usual
// wording of an OAuth server or a gateway) must not get it into the
// request's e2a.error message nor the bridge's log: the scrub takes the
// credential after the scheme out too, not only the whole value.
func TestHeaderTokenScrubbed(t *testing.T) {
	const token = "tok-5e1f0c9a7b3d4e2f"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_token","error_description":"the %s token %s has expired"}`, scheme, tok)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithCredentials(Credentials{Headers: map[string]string{"Authorization": "Bearer " + token}}))
	if err != nil {
		t.Fatal(err)
	}
	ae, logs := serveRefused(t, c, srv.URL+"/agent")
	if ae.Code != CodeAuth {
		t.Fatalf("Serve: %v, want an upstream_auth agent error", ae)
	}
	if strings.Contains(ae.Message, token) {
		t.Errorf("the e2a.error message holds the upstream token: %q", ae.Message)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the bridge's log holds the upstream token:\n%s", logs)
	}
	if got := c.Scrub("token " + token + " has expired"); strings.Contains(got, token) {
		t.Errorf("Client.Scrub leaves the token of its Authorization header: %q", got)
	}
}

// TestShortHeaderValueNotScrubbed: a header value shorter than a secret
// can be (X-Api-Version: 2) is left in messages (scrubbing it mangled
// every status code and number holding its characters), a long one and
// the credential of a scheme's value are taken out.
func TestShortHeaderValueNotScrubbed(t *testing.T) {
	c := Credentials{Headers: map[string]string{"X-Api-Version": "2", "X-Key": "k-7f3a9c2e", "Authorization": "Basic dXNlcjpwYXNz"}}
	got := c.scrub("upstream answered 429: retry in 2 s; key k-7f3a9c2e; credentials dXNlcjpwYXNz")
	want := "upstream answered 429: retry in 2 s; key [redacted]; credentials [redacted]"
	if got != want {
		t.Errorf("scrub: %q, want %q", got, want)
	}
}

// TestURLQueryKeyScrubbed: a key in the upstream URL's query
// (--openai 'https://gateway/v1?key=…', a gateway's ?token=…), which the
// logs never show (Location: scheme and host, "/…"), is taken out of an
// upstream's words too: an upstream that quotes the URL it was called at
// (a 404 naming the route, an error echoing the request) must not get the
// key into the request's e2a.error message nor the bridge's log.
func TestURLQueryKeyScrubbed(t *testing.T) {
	const key = "qk-8d2c4e6f1a3b5790"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"no access to %s (key %s)"}}`, r.URL.RequestURI(), r.URL.Query().Get("api-key"))
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL + "/v1?api-key=" + key + "&api-version=2")
	if err != nil {
		t.Fatal(err)
	}
	ae, logs := serveRefused(t, c, srv.URL+"/v1/chat/completions?api-key="+key)
	if ae.Code != CodeAuth {
		t.Fatalf("Serve: %v, want an upstream_auth agent error", ae)
	}
	if strings.Contains(ae.Message, key) {
		t.Errorf("the e2a.error message holds the key of the upstream URL's query: %q", ae.Message)
	}
	if strings.Contains(logs, key) {
		t.Errorf("the bridge's log holds the key of the upstream URL's query:\n%s", logs)
	}
	if got := c.Scrub("retry in 2 s"); got != "retry in 2 s" {
		t.Errorf("Client.Scrub took a short query value (api-version=2) out: %q", got)
	}
}

// TestURLPathTokenScrubbed: a token in the upstream URL's path (--http
// 'https://hooks.example/hook/<token>', a webhook's URL), which the logs
// never show (Location: scheme and host, "/…"), is taken out of an
// upstream's words: a 404 naming the route it was called at must not put
// the token into the request's e2a.error message nor the bridge's log.
// A route's words (agent, v1) are left.
func TestURLPathTokenScrubbed(t *testing.T) {
	const token = "a7f3c9e2b5d14f60"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":"no route %s"}`, r.URL.Path)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL + "/v1/agent/hook/" + token)
	if err != nil {
		t.Fatal(err)
	}
	ae, logs := serveRefused(t, c, c.Base().String())
	if strings.Contains(ae.Message, token) {
		t.Errorf("the e2a.error message holds the token of the upstream URL's path: %q", ae.Message)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the bridge's log holds the token of the upstream URL's path:\n%s", logs)
	}
	if got := c.Scrub("no route /v1/agent/hook"); got != "no route /v1/agent/hook" {
		t.Errorf("Client.Scrub took a route's words out: %q", got)
	}
}

// serveRefused serves one request through a handler of c's upstream at url
// (no retry) and returns its agent error and the bridge's log: what a
// secret of c's must stay out of.
func serveRefused(t *testing.T, c *Client, url string) (*agent.Error, string) {
	t.Helper()
	var logs testkit.Buffer
	h, err := New("p", &clientUpstream{c: c, url: url}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		WithMetrics(prometheus.NewRegistry()), WithRetry(0, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	err = h.Serve(context.Background(), &e2a.Envelope{RequestID: "r1"}, &recWriter{})
	var ae *agent.Error
	if !errors.As(err, &ae) {
		t.Fatalf("Serve: %v, want an agent error", err)
	}
	return ae, logs.String()
}

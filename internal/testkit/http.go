package testkit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Open sends a request with http.DefaultClient: body as given (none when
// ""), headers as name, value pairs. It returns the response with its
// body unread, closed when the test ends; a request that cannot be sent
// fails the test.
func Open(t testing.TB, method, url, body string, hdr ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return send(t, req)
}

// send sends req with http.DefaultClient and returns the response with
// its body unread, closed when the test ends; a request that cannot be
// sent fails the test.
func send(t testing.TB, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Send is Do for a request made by the caller (headers Open cannot
// give, such as one named twice): sent with http.DefaultClient, its
// answer's body read whole.
func Send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	return readAll(t, send(t, req))
}

// Do is Open with the body read whole; a body that cannot be read fails
// the test.
func Do(t testing.TB, method, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return readAll(t, Open(t, method, url, body, hdr...))
}

// readAll reads resp's body whole; a body that cannot be read fails the
// test.
func readAll(t testing.TB, resp *http.Response) (*http.Response, []byte) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// Answerer is an HTTP server on loopback that answers every POST (any
// method but GET) with the body last given to Set, as contentType: a fuzz
// target's upstream whose answer is the case's input. GET requests go to
// the get handler (404 when nil), e.g. an agent card.
type Answerer struct {
	*httptest.Server
	body atomic.Pointer[[]byte]
}

// NewAnswerer starts an Answerer, closed when the test (or fuzz target)
// ends; until Set it answers an empty body.
func NewAnswerer(t testing.TB, contentType string, get http.HandlerFunc) *Answerer {
	a := &Answerer{}
	a.Set(nil)
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			if get == nil {
				http.NotFound(w, r)
				return
			}
			get(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(*a.body.Load())
	}))
	t.Cleanup(a.Close)
	return a
}

// Set makes body the answer of the next requests.
func (a *Answerer) Set(body []byte) { a.body.Store(&body) }

// Answer is what a client gets for one HTTP request: its status, content
// type and body (comparable: two reads answered alike are ==).
type Answer struct {
	Status      int
	ContentType string
	Body        string
}

// Get sends GET url with hdr (name, value pairs) and reads the whole
// answer.
func Get(t testing.TB, url string, hdr ...string) Answer {
	t.Helper()
	resp := Open(t, http.MethodGet, url, "", hdr...)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(body)}
}

// Read is a read of one request of the E2A read API (package egress): the
// path after /v1/requests/{id} and the headers to send (name, value
// pairs).
type Read struct {
	Name, Path string
	Hdr        []string
}

// ReadAPIReads are the reads of a finished request that the E2A read API
// answers alike from the hot streams and from a History (the tests of
// egress and of internal/audit compare them byte for byte): the aggregated
// JSON (whole, waited for, resumed, past the end, with projections), the
// SSE and NDJSON streams (whole, resumed with Last-Event-ID and ?from=,
// past the final frame: 204). The finished request has at least 4 frames.
var ReadAPIReads = []Read{
	{"json", "", nil},
	{"json from 2", "?from=2", nil},
	{"json wait", "?wait=true", nil},
	{"json past the end", "?from=99", nil},
	{"json projections", "?projections=true", nil},
	{"sse", "/stream", nil},
	{"sse Last-Event-ID 1", "/stream", []string{"Last-Event-ID", "1"}},
	{"ndjson", "/stream", []string{"Accept", "application/x-ndjson"}},
	{"ndjson from 3", "/stream?from=3", []string{"Accept", "application/x-ndjson"}},
	{"sse past the final frame", "/stream?from=99", nil},
}

// Held is an HTTP server that holds every request until Release: each
// request is announced on Arrived as it comes (a buffer of one: receive
// each), then answers 200 {"ok":true} once released. The server is
// released and closed when the test ends.
type Held struct {
	URL     string
	Arrived <-chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewHeld starts a Held server.
func NewHeld(t testing.TB) *Held {
	arrived := make(chan struct{}, 1)
	h := &Held{Arrived: arrived, release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-h.release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	h.URL = srv.URL
	t.Cleanup(srv.Close)
	t.Cleanup(h.Release) // runs first: the held handlers return before Close waits for them
	return h
}

// Release lets every held request, and every later one, answer.
func (h *Held) Release() { h.once.Do(func() { close(h.release) }) }

// FlushFails checks that a flush of wrap's writer, through
// http.ResponseController, returns the error of the writer under it: a
// write deadline that passed (a client that stopped reading), which egress
// counts and cuts off as a slow client (render.Output.SlowClient). A
// writer with Flush alone, which ResponseController prefers to Unwrap,
// lost it: its stream saw only its request's context canceled, a client
// gone.
func FlushFails(t testing.TB, wrap func(http.ResponseWriter) http.ResponseWriter) {
	t.Helper()
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = wrap(w)
		rc := http.NewResponseController(w)
		if _, err := w.Write([]byte("data: x\n\n")); err != nil { // buffered
			got <- err
			return
		}
		if err := rc.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
			got <- err
			return
		}
		got <- rc.Flush()
	}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	if err := <-got; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("flush past the write deadline returned %v, want an error wrapping os.ErrDeadlineExceeded", err)
	}
}

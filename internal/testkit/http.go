package testkit

import (
	"io"
	"net/http"
	"strings"
	"testing"
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Do is Open with the body read whole; a body that cannot be read fails
// the test.
func Do(t testing.TB, method, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	resp := Open(t, method, url, body, hdr...)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

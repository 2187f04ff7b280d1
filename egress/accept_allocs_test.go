package egress

import (
	"mime"
	"net/http/httptest"
	"testing"
)

// TestAcceptReadWithoutAllocs: reading an Accept header of media ranges
// without parameters (what clients of streams send: text/event-stream)
// allocates nothing (acceptQ and rangeQ split and parsed it for each type
// they were asked about: 17 allocations a request); a range with
// parameters is read by mime.ParseMediaType as before.
func TestAcceptReadWithoutAllocs(t *testing.T) {
	r := httptest.NewRequest("GET", "/v1/requests/r/stream", nil)
	r.Header.Set("Accept", "text/event-stream")
	n := testing.AllocsPerRun(100, func() {
		if NegotiateE2A(r) != mtSSE || preferred(r, mtNDJSON, mtSSE) != mtSSE {
			t.Fatal("text/event-stream not preferred")
		}
		if q, read := rangeQ(r, "application/json"); q != 0 || !read {
			t.Fatalf("application/json: q %v read %t", q, read)
		}
	})
	if n != 0 {
		t.Errorf("reading Accept: %v allocations, want none", n)
	}
}

// FuzzMediaRange: mediaRange reads every range as mime.ParseMediaType
// does (its type, whether it is one, its q-value).
func FuzzMediaRange(f *testing.F) {
	for _, part := range []string{"", " ", "text/event-stream", " TEXT/Event-Stream ", "text/", "/x", "text", "attachment",
		"text/event-stream extra", "text/*", "*/*", "*", "a/b/c", "é/x", "x/é", "text/\tplain", "te(xt/plain", "text/pl@in",
		"text/plain;q=0.5", "text/plain ; q=0", "text/plain;q=0.0;level=1", "text/plain;", "text/plain;q", "x\x00/y", "\x7f/x",
		"İ/x", "\u212a/x", "x/\xff", "application/x-ndjson", "a/b;q=2", "a/b,c/d", "a\\b/c", "a/b\"", "a/b\r"} {
		f.Add(part)
	}
	f.Fuzz(func(t *testing.T, part string) {
		mt, params, err := mime.ParseMediaType(part)
		got, q, ok := mediaRange(part)
		if ok != (err == nil) || got != mt || ok && q != qOf(params) {
			t.Errorf("%q: %q q %v ok %t; mime.ParseMediaType %q q %v err %v", part, got, q, ok, mt, qOf(params), err)
		}
	})
}

// TestQueryValueWithoutQuery: a request without a query string has its
// parameters read without parsing one (url.ParseQuery allocates its map
// even for none: the reads of ?from=, ?wait=, ?projections= and ?agent=
// were 5 allocations a request), and ResumePoint reads Last-Event-ID by
// its canonical name (2 more); one with a query reads it as r.URL.Query,
// a Last-Event-ID written in any case is read.
func TestQueryValueWithoutQuery(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/requests", nil)
	if n := testing.AllocsPerRun(100, func() {
		if from, err := ResumePoint(r); from != 0 || err != nil || QueryValue(r, "wait") != "" {
			t.Fatal("a value without a query")
		}
	}); n != 0 {
		t.Errorf("reading a request without a query: %v allocations, want none", n)
	}
	r = httptest.NewRequest("POST", "/v1/requests?wait=true&from=3&agent=a%20b", nil)
	if from, err := ResumePoint(r); from != 3 || err != nil || QueryValue(r, "wait") != "true" || QueryValue(r, "agent") != "a b" ||
		QueryValue(r, "x") != "" {
		t.Errorf("query read: from %d (%v), wait %q, agent %q", from, err, QueryValue(r, "wait"), QueryValue(r, "agent"))
	}
	r.Header["Last-Event-Id"] = []string{" 4 "}
	if from, err := ResumePoint(r); from != 5 || err != nil {
		t.Errorf("Last-Event-ID 4: resume point %d (%v), want 5", from, err)
	}
}

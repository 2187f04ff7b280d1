package egress

import (
	"mime"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAccept feeds any Accept header (one value a line) to the readers of
// the whole header, acceptQ and rangeQ, for the media types the front
// doors offer, and compares them with a reading written apart: the header
// split into media ranges at the commas outside quoted strings (RFC 9110
// §5.6.1, §5.6.4), each range read by mime.ParseMediaType, its q-value by
// qOf, a q of 0 excluding; rangeQ's most specific matching range (type,
// type/*, */*) deciding, the highest q of that specificity.
func FuzzAccept(f *testing.F) {
	for _, s := range []string{"", "text/event-stream", "application/x-ndjson;q=0.5, text/event-stream;q=0.9", "*/*;q=0",
		"text/*;q=0.2, */*", "application/json, text/event-stream;q=0", `a/b;x="1,text/event-stream", c/d`,
		`a/b;x="y\",text/event-stream;q=1`, "text/event-stream\napplication/json;q=0.1", ",,, text/event-stream ,", "TEXT/EVENT-STREAM;Q=0.000"} {
		f.Add(s)
	}
	types := []string{mtSSE, mtNDJSON, "application/json", "text/plain"}
	f.Fuzz(func(t *testing.T, accept string) {
		r := httptest.NewRequest("GET", "/v1/requests/r/stream", nil)
		if accept != "" {
			r.Header["Accept"] = strings.Split(accept, "\n")
		}
		for _, mt := range types {
			want, wantRange, wantRead := referenceAccept(r.Header["Accept"], mt)
			if got := acceptQ(r, mt); got != want {
				t.Errorf("Accept %q: acceptQ(%s) %v, want %v", accept, mt, got, want)
			}
			if got, read := rangeQ(r, mt); got != wantRange || read != wantRead {
				t.Errorf("Accept %q: rangeQ(%s) %v %t, want %v %t", accept, mt, got, read, wantRange, wantRead)
			}
		}
	})
}

// referenceAccept reads the Accept values as FuzzAccept says: mt's q by
// name (the highest, 0 when excluded or unlisted), by its most specific
// range, and whether any range could be read.
func referenceAccept(values []string, mt string) (byName, byRange float64, read bool) {
	typ, _, _ := strings.Cut(mt, "/")
	spec := -1
	for _, v := range values {
		for _, part := range splitOutsideQuotes(v) {
			t, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			read = true
			q := qOf(params)
			if strings.EqualFold(t, mt) {
				byName = max(byName, q)
			}
			s := -1
			switch {
			case strings.EqualFold(t, mt):
				s = 2
			case strings.EqualFold(t, typ+"/*"):
				s = 1
			case t == "*/*":
				s = 0
			}
			switch {
			case s < 0 || s < spec:
			case s > spec:
				byRange, spec = q, s
			default:
				byRange = max(byRange, q)
			}
		}
	}
	return byName, byRange, read
}

// splitOutsideQuotes splits s at the commas outside quoted strings (a
// backslash quotes the next character inside one).
func splitOutsideQuotes(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

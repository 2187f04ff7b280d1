package a2av1

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzPageToken feeds any ListTasks pageToken (a client's, opaque to it,
// on every binding: the JSON-RPC params, the HTTP+JSON query, the gRPC
// message) to decodeCursor. Properties: no panic; an error is errCursor;
// a cursor it reads agrees with a reading written apart (base64url without
// padding, then three lines: two decimal int64 nanoseconds and the id,
// which may hold newlines); re-encoding it reads back to the same cursor;
// and the listing's order is a consistent order on it (compare with itself
// 0, antisymmetric against a task of the same listing).
func FuzzPageToken(f *testing.F) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 123456789, time.UTC)
	for _, c := range []cursor{{at.Add(time.Minute), at, "t\n1"}, {at, at, ""}, {time.Unix(0, 0), time.Unix(0, -1), "x"}} {
		f.Add(c.encode(), "other")
	}
	raw := base64.RawURLEncoding.EncodeToString
	for _, s := range []string{"", "!", "bm8tbmV3bGluZQ", raw([]byte("1\n2")), raw([]byte("+1\n-0\nid")),
		raw([]byte("9223372036854775807\n-9223372036854775808\nz")), raw([]byte("1e3\n2\nid")), base64.URLEncoding.EncodeToString([]byte("1\n2\nab"))} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, tok, other string) {
		c, err := decodeCursor(tok)
		want, ok := referenceCursor(tok)
		if err != nil {
			if !errors.Is(err, errCursor) {
				t.Fatalf("%q: error %v is not errCursor", tok, err)
			}
			if ok {
				t.Fatalf("%q refused (%v), the reference reads %+v", tok, err, want)
			}
			return
		}
		if tok == "" {
			if c != nil {
				t.Fatalf("no token read as %+v", c)
			}
			return
		}
		if !ok || !c.t0.Equal(want.t0) || !c.at.Equal(want.at) || c.id != want.id {
			t.Fatalf("%q read as %+v, the reference %+v (%v)", tok, c, want, ok)
		}
		again, err := decodeCursor(c.encode())
		if err != nil || !again.t0.Equal(c.t0) || !again.at.Equal(c.at) || again.id != c.id {
			t.Fatalf("%q: %+v re-encoded reads %+v, %v", tok, c, again, err)
		}
		if c.compare(*c) != 0 {
			t.Fatalf("%+v compares %d with itself", c, c.compare(*c))
		}
		o := cursor{t0: c.t0, at: c.at.Add(time.Duration(len(other)) * time.Second), id: other}
		if a, b := c.compare(o), o.compare(*c); a != -b {
			t.Fatalf("compare not antisymmetric: %+v vs %+v: %d, %d", c, o, a, b)
		}
	})
}

// referenceCursor reads a page token as the format says, independently of
// decodeCursor.
func referenceCursor(tok string) (cursor, bool) {
	if tok == "" || strings.ContainsAny(tok, "=+/") {
		return cursor{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, false
	}
	f := strings.SplitN(string(b), "\n", 3)
	if len(f) != 3 {
		return cursor{}, false
	}
	var ns [2]int64
	for i := range ns {
		if ns[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return cursor{}, false
		}
	}
	return cursor{t0: time.Unix(0, ns[0]), at: time.Unix(0, ns[1]), id: f[2]}, true
}

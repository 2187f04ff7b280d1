package console

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxBadQueryMessage bounds the message of a refused list query: its
// fixed text (the statuses listed, under 120 bytes) and one client value
// cut to 128 bytes (jsonrpc.QuoteForMessage), quoted (at most 4 bytes for
// one, \x01), with an ellipsis: whatever the length of the query.
const maxBadQueryMessage = 120 + 4*128 + 2 + len("…")

// FuzzQueryFromURL: any query string of GET /console/api/requests. The
// list query is read without a panic; a refusal (QueryFromURL's or the
// lister's check, validate) is ErrBadQuery, answered 400 bad_request with
// a message of at most maxBadQueryMessage bytes, every client value in
// it quoted (no control character, valid UTF-8). An accepted query keeps
// each filter as sent, reads since and until as a duration ago or the RFC
// 3339 time given, before and limit as the numbers written; and the query
// written back as parameters (queryValues) reads as the same query.
func FuzzQueryFromURL(f *testing.F) {
	for _, s := range []string{
		"task=t&since=15m&until=2026-01-01T11:59:00Z&before=42&limit=9",
		"status=failed&user=alice&context=c1&session=s&request_id=r",
		"status=nope", "since=yesterday", "before=x", "limit=0", "since=1h&until=2h",
		"since=-5m&until=2026-01-01T12:00:00.123456789%2B02:00", "limit=%2B7&before=007",
	} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		v, _ := url.ParseQuery(raw) // as r.URL.Query() reads it
		q, err := QueryFromURL(v, now)
		if err == nil {
			checkAccepted(t, v, q, now)
			err = q.validate()
		}
		if err == nil {
			return
		}
		if !errors.Is(err, ErrBadQuery) {
			t.Fatalf("%q: refused with %v, not ErrBadQuery", raw, err)
		}
		w := httptest.NewRecorder()
		badQuery(w, err)
		var body struct {
			Error struct{ Code, Message string }
		}
		if w.Code != 400 || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error.Code != "bad_request" {
			t.Fatalf("%q: answered %d %s", raw, w.Code, w.Body)
		}
		m := body.Error.Message
		if len(m) > maxBadQueryMessage || !strings.HasPrefix(m, "bad query: ") {
			t.Fatalf("%q: message of %d bytes: %.300q", raw, len(m), m)
		}
		if !utf8.ValidString(m) || strings.ContainsFunc(m, unicode.IsControl) {
			t.Fatalf("%q: message not escaped: %q", raw, m)
		}
	})
}

// checkAccepted checks an accepted query against the parameters it was
// read from.
func checkAccepted(t *testing.T, v url.Values, q Query, now time.Time) {
	t.Helper()
	for name, got := range map[string]string{"request_id": q.RequestID, "task": q.TaskID, "session": q.SessionID,
		"context": q.ContextID, "user": q.User, "status": q.Status} {
		if got != v.Get(name) {
			t.Fatalf("%s=%q read as %q", name, v.Get(name), got)
		}
	}
	for name, got := range map[string]time.Time{"since": q.Since, "until": q.Until} {
		s := v.Get(name)
		if d, err := time.ParseDuration(s); err == nil {
			if d < 0 || !got.Equal(now.Add(-d)) {
				t.Fatalf("%s=%q read as %v, not %v ago", name, s, got, d)
			}
			continue
		}
		if s == "" {
			if !got.IsZero() {
				t.Fatalf("no %s read as %v", name, got)
			}
			continue
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !got.Equal(want) {
			t.Fatalf("%s=%q accepted as %v (RFC 3339: %v, %v)", name, s, got, want, err)
		}
	}
	if s := v.Get("before"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err != nil || n != q.Before {
			t.Fatalf("before=%q read as %d", s, q.Before)
		}
	}
	if s := v.Get("limit"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n != q.Limit || n < 1 {
			t.Fatalf("limit=%q read as %d", s, q.Limit)
		}
	}
	back, err := QueryFromURL(queryValues(q), now.Add(time.Hour))
	if err != nil {
		t.Fatalf("%+v written as %q refused: %v", q, queryValues(q).Encode(), err)
	}
	if !back.Since.Equal(q.Since) || !back.Until.Equal(q.Until) {
		t.Fatalf("times %v %v read back as %v %v", q.Since, q.Until, back.Since, back.Until)
	}
	back.Since, back.Until = q.Since, q.Until
	if back != q {
		t.Fatalf("%+v read back as %+v", q, back)
	}
}

// queryValues writes q as the list's parameters: the times as RFC 3339,
// so that they mean the same at any other now.
func queryValues(q Query) url.Values {
	v := url.Values{}
	for name, s := range map[string]string{"request_id": q.RequestID, "task": q.TaskID, "session": q.SessionID,
		"context": q.ContextID, "user": q.User, "status": q.Status} {
		if s != "" {
			v.Set(name, s)
		}
	}
	for name, tm := range map[string]time.Time{"since": q.Since, "until": q.Until} {
		if !tm.IsZero() {
			v.Set(name, tm.Format(time.RFC3339Nano))
		}
	}
	if q.Before != 0 {
		v.Set("before", strconv.FormatUint(q.Before, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

package a2av1

import (
	"cmp"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// A ListTasks page token is opaque to clients: the sort key of the last
// task of the page before (its status timestamp in Unix nanoseconds, and
// its id: the listing's total order), base64url-encoded.

// errCursor is the error of a page token this server did not write.
var errCursor = errors.New("not a token of this server")

// cursor is a task's place in a listing: its status timestamp at (the
// time its record was written when it has none), then its id; a page
// starts after the cursor of the page before.
type cursor struct {
	at time.Time
	id string
}

// compare orders cursors as ListTasks lists: the most recent status
// first, ties by id.
func (c cursor) compare(o cursor) int {
	return cmp.Or(o.at.Compare(c.at), cmp.Compare(c.id, o.id))
}

// encode is the page token of the page after c.
func (c cursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "\n" + c.id))
}

// decodeCursor reads a page token; nil for none (the first page).
func decodeCursor(tok string) (*cursor, error) {
	if tok == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, errCursor
	}
	at, id, ok := strings.Cut(string(b), "\n")
	if !ok {
		return nil, errCursor
	}
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, errCursor
	}
	return &cursor{at: time.Unix(0, ns), id: id}, nil
}

package a2av1

import (
	"cmp"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// A ListTasks page token is opaque to clients: when the listing started
// (its first page's call) and the sort key of the last task of the page
// before (its status timestamp, and its id), in Unix nanoseconds,
// base64url-encoded.
//
// A listing's order is the spec's (§3.1.4: by status timestamp, most
// recent first) for the tasks as they stood when it started: a listing
// whose tasks do not change while it is paged is in exactly that order.
// A task whose status changes while a client pages would move ahead of
// the client's cursor and be on no later page (found by review: a task
// that finished between two pages was listed on none). So the tasks whose
// status timestamp is after the listing's start come after all the others,
// by id: such a task is listed on a later page (again, if an earlier page
// had it), and one that changes again keeps its place, so that a listing
// ends (a second review: ordered by their change, two tasks reporting
// progress between pages took turns being next, and the listing never
// ended). The start is the first page's call, or the newest status
// timestamp then when an agent's clock runs ahead of the pipeline's, so
// that a listing's first page is always in the spec's order.

// errCursor is the error of a page token this server did not write.
var errCursor = errors.New("not a token of this server")

// cursor is a task's place in a listing that started at t0: its status
// timestamp at (the time its record was written when it has none), then
// its id; a page starts after the cursor of the page before.
type cursor struct {
	t0 time.Time
	at time.Time
	id string
}

// changed reports a task whose status changed after its listing started.
func (c cursor) changed() bool { return c.at.After(c.t0) }

// compare orders cursors of one listing as ListTasks lists: the tasks as
// they stood when it started, most recent status first (ties by id), then
// those changed since, by id.
func (c cursor) compare(o cursor) int {
	switch cc, oc := c.changed(), o.changed(); {
	case cc != oc:
		if cc {
			return 1
		}
		return -1
	case cc:
		return cmp.Compare(c.id, o.id)
	}
	return cmp.Or(o.at.Compare(c.at), cmp.Compare(c.id, o.id))
}

// encode is the page token of the page after c.
func (c cursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.t0.UnixNano(), 10) + "\n" +
		strconv.FormatInt(c.at.UnixNano(), 10) + "\n" + c.id))
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
	t0, rest, ok := strings.Cut(string(b), "\n")
	if !ok {
		return nil, errCursor
	}
	at, id, ok := strings.Cut(rest, "\n")
	if !ok {
		return nil, errCursor
	}
	start, err := strconv.ParseInt(t0, 10, 64)
	if err != nil {
		return nil, errCursor
	}
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, errCursor
	}
	return &cursor{t0: time.Unix(0, start), at: time.Unix(0, ns), id: id}, nil
}

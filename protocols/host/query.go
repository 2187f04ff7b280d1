package host

import (
	"errors"
	"fmt"
	"net/url"
)

// ErrQuery: a request's query is no URL-encoded form (ReadQuery); its
// text, with what url.ParseQuery could not read, is the client's message.
var ErrQuery = errors.New("the query cannot be read")

// ReadQuery reads raw, a request's query, as url.ParseQuery reads it; a
// query that is no URL-encoded form (an escape that is none, "%zz"; a
// semicolon between parameters; more than Go's 10000 parameters) is
// ErrQuery naming what is wrong (`the query cannot be read: invalid URL
// escape "%zz"`), with q what could be read. URL.Query() drops such a
// pair silently, and with it the pool the pipeline's own ?agent= names,
// so that another agent than the one named answered: the host's gate
// refuses such a query whole at every door, in the door's shape, as the
// gRPC-gateway's req.ParseForm refuses it (A2A v1.0's HTTP+JSON binding).
func ReadQuery(raw string) (q url.Values, err error) {
	q, err = url.ParseQuery(raw)
	if err != nil {
		return q, fmt.Errorf("%w: %v", ErrQuery, err)
	}
	return q, nil
}

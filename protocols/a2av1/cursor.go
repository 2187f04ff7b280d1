package a2av1

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// A ListTasks page token is opaque to clients: the update time and the id
// of the last task of the page before (the listing's total order),
// base64url-encoded.

// errCursor is the error of a page token this server did not write.
var errCursor = errors.New("not a token of this server")

// cursor is where a page starts: after the task updated at updated with
// id id.
type cursor struct{ updated, id string }

func encodeCursor(t *host.ListedTask) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.Updated + "\n" + t.ID))
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
	updated, id, ok := strings.Cut(string(b), "\n")
	if !ok {
		return nil, errCursor
	}
	return &cursor{updated: updated, id: id}, nil
}

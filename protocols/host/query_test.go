package host_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestReadQuery: a query that is no URL-encoded form is ErrQuery naming
// what is wrong (URL.Query() dropped the pair, ?agent= with it); a form
// is read as url.ParseQuery reads it.
func TestReadQuery(t *testing.T) {
	for raw, says := range map[string]string{
		"agent=ec%zzho":    `invalid URL escape "%zz"`,
		"agent=echo;x":     "semicolon",
		"x=%zz&agent=echo": `invalid URL escape "%zz"`,
	} {
		_, err := host.ReadQuery(raw)
		if !errors.Is(err, host.ErrQuery) || !strings.Contains(err.Error(), says) ||
			!strings.HasPrefix(err.Error(), "the query cannot be read: ") {
			t.Errorf("ReadQuery(%q): %v; want ErrQuery saying %s", raw, err, says)
		}
	}
	q, err := host.ReadQuery("agent=a%20b&wait=true&agent=a+b")
	if err != nil || q.Get("agent") != "a b" || len(q["agent"]) != 2 || q.Get("wait") != "true" {
		t.Errorf("ReadQuery of a form: %v %v", q, err)
	}
}

package normalizer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestClientMessage: an adapter's error keeps its text for logs (package,
// protocol, method, kind), while its ClientMessage, what the front doors
// answer, is the kind and what was wrong in the protocol's words: no
// "normalizer …" prefix, no other package's prefix ("e2a: ", "subjects: "),
// no Go type; an unknown method is named. The error chain is unchanged.
func TestClientMessage(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for _, c := range []struct {
		name, log, client string
		kind              error
		err               func() error
	}{
		{"a2a unknown method", `normalizer a2a "foo/bar": method not found: `, `method not found: "foo/bar": not an A2A v0.3 method`, normalizer.ErrMethodNotFound,
			func() error {
				_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"foo/bar"}`)})
				return err
			}},
		{"acp params", `normalizer acp "session/prompt": invalid params: `, `invalid params: prompt must be an array of content blocks`, normalizer.ErrInvalidParams,
			func() error {
				_, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":"hi"}}`)})
				return err
			}},
		{"e2a array", `normalizer e2a: invalid request: `, `invalid request: invalid JSON: the body must be a JSON object, not an array`, normalizer.ErrInvalidRequest,
			func() error { _, err := n.FromE2A(normalizer.Input{Body: []byte(`[1,2]`)}); return err }},
		{"e2a params", `normalizer e2a: invalid request: `, `invalid request: invalid envelope: field "params": must be an object, not a string`, normalizer.ErrInvalidRequest,
			func() error { _, err := n.FromE2A(normalizer.Input{Body: []byte(`{"params":"x"}`)}); return err }},
		{"e2a context id", `normalizer e2a "m": invalid params: `, `invalid params: context id "a\nb" is not a valid id`, subjects.ErrInvalidID,
			func() error {
				_, err := n.FromE2A(normalizer.Input{Body: []byte(`{"method":"m","context_id":"a\nb"}`)})
				return err
			}},
	} {
		err := c.err()
		var ne *normalizer.Error
		if !errors.As(err, &ne) || !errors.Is(err, c.kind) {
			t.Fatalf("%s: %v, want a normalizer error of kind %v", c.name, err, c.kind)
		}
		if !strings.HasPrefix(err.Error(), c.log) {
			t.Errorf("%s: Error() %q, want it to begin %q", c.name, err.Error(), c.log)
		}
		m := ne.ClientMessage()
		if !strings.HasPrefix(m, c.client) {
			t.Errorf("%s: ClientMessage() %q, want it to begin %q", c.name, m, c.client)
		}
		for _, bad := range []string{"normalizer", "e2a: ", "subjects: ", "json: ", "Go ", "map["} {
			if strings.Contains(m, bad) {
				t.Errorf("%s: ClientMessage() %q has %q", c.name, m, bad)
			}
		}
	}
}

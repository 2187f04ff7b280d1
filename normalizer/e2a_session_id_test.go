package normalizer_test

import (
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestE2ASessionIDOutsideGrammarRefused: an E2A session_id is an id like
// the request, task and context ids (docs/security.md: ids follow one
// grammar, subjects.ValidateRequestID): the E2A door reads it as the key of
// an ACP session record (protocols/e2a admitTurn), the console indexes
// requests by it, and a bridge keys an upstream conversation by it
// (bridge.ConversationOf). One outside the grammar (a bidi override, a
// terminal escape, a newline) was accepted; it is refused as the other
// ids are: ErrInvalidParams wrapping subjects.ErrInvalidID (HTTP 400). A
// valid one is kept as sent.
func TestE2ASessionIDOutsideGrammarRefused(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for name, lit := range map[string]string{
		"bidi override": `"\u202eabc"`,
		"escape":        `"x\u001b[31my"`,
		"newline":       `"a\nb"`,
		"trailing ":     `"sess "`,
	} {
		body := `{"request_id":"r-1","session_id":` + lit + `,"params":{"text":"hi"}}`
		res, err := n.FromE2A(normalizer.Input{Body: []byte(body)})
		if err == nil {
			t.Errorf("%s: session_id %s accepted (envelope session_id %q); want it refused as the task and context ids are", name, lit, res.Envelope.SessionID)
			continue
		}
		if !errors.Is(err, subjects.ErrInvalidID) || normalizer.HTTPStatus(err) != 400 {
			t.Errorf("%s: err = %v (HTTP %d), want a refused id (400)", name, err, normalizer.HTTPStatus(err))
		}
	}
	res, err := n.FromE2A(normalizer.Input{Body: []byte(`{"request_id":"r-2","session_id":"sess 1/ü","params":{"text":"hi"}}`)})
	if err != nil || res.Envelope.SessionID != "sess 1/ü" {
		t.Fatalf("a valid session_id: %v %+v", err, res)
	}
}

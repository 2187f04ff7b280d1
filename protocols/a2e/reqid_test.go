package a2e_test

import (
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
)

// TestRefusedReqIDNotEchoed: the answer's req_id is the client's
// correlation id, copied into every line of the answer. A req_id (or an
// id answering for a message without one) of 1 MiB or with control
// characters was published and came back whole in each line; it is
// refused up front with one error line (invalid_params, not retryable)
// that names the message by its id, or by none, and nothing is published.
func TestRefusedReqIDNotEchoed(t *testing.T) {
	huge := `\u001b[2J\n` + strings.Repeat("x", 1<<20)
	for name, c := range map[string]struct{ line, wantReqID string }{
		"huge req_id":           {`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"` + huge + `"}`, "c1"},
		"req_id with a newline": {`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r\n1"}`, "c1"},
		"huge id, no req_id":    {`{"a2e":"1.0","id":"` + huge + `","type":"tool/call/req"}`, ""},
		"ping with a huge id":   {`{"a2e":"1.0","id":"` + huge + `","type":"ping"}`, ""},
	} {
		h := &fakeHost{BodyLimit: 2 << 20}
		rec, msgs := post(t, h, c.line+"\n")
		if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType || msgs[0].Code != normalizer.A2ECodeInvalidParams ||
			msgs[0].Retryable == nil || *msgs[0].Retryable {
			t.Errorf("%s: %d bytes of answer, want one invalid_params error line, not retryable", name, rec.Body.Len())
			continue
		}
		if msgs[0].ReqID != c.wantReqID {
			t.Errorf("%s: req_id %.40q, want %q", name, msgs[0].ReqID, c.wantReqID)
		}
		if n := rec.Body.Len(); n > 2<<10 {
			t.Errorf("%s: the error line is %d bytes, want it bounded", name, n)
		}
		if pub := h.Published(); len(pub) != 0 {
			t.Errorf("%s: published %d requests", name, len(pub))
		}
	}
}

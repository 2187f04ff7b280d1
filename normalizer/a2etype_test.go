package normalizer_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestA2ERefusedTypeNotEchoed: an A2E type over normalizer.MaxA2EType
// bytes, or with a control, format or line-separator character, is
// refused up front (invalid_params): an accepted call's answer lines carry
// a type built from it ("…/resp"), so a 1 MiB or control-character type
// came back whole in every one. The error's Method (the front door's
// capability_name, quoted and cut in the message as every method is) is at
// most its first runes within the grammar, never the type whole. A type
// of the bound, and a plain one with white space inside, are accepted.
func TestA2ERefusedTypeNotEchoed(t *testing.T) {
	n := testNormalizer(t)
	for name, typ := range map[string]string{
		"huge with ESC":     `\u001b[2J` + strings.Repeat("x", 1<<20),
		"newline":           `x/req\n`,
		"nul":               `x\u0000/req`,
		"line separator":    `x\u2028/req`,
		"one byte too long": longID(normalizer.MaxA2EType + 1),
		"trailing space":    `x/req `,
	} {
		_, err := n.FromA2E(normalizer.Input{Body: []byte(`{"id":"c1","type":"` + typ + `","req_id":"r1"}`)})
		var ne *normalizer.Error
		if !errors.As(err, &ne) || normalizer.A2ECode(err) != normalizer.A2ECodeInvalidParams {
			t.Errorf("%s: %v, want invalid_params", name, err)
			continue
		}
		var whole string
		if err := json.Unmarshal([]byte(`"`+typ+`"`), &whole); err != nil {
			t.Fatal(err)
		}
		if m := ne.Method; ne.ReqID != "r1" || m == whole || !strings.HasPrefix(whole, m) || len(m) > normalizer.MaxA2EType ||
			(m != "" && subjects.ValidateRequestID(m) != nil) {
			t.Errorf("%s: error names type %.40q, req_id %q (want at most its first %d bytes within the grammar, r1)", name, m, ne.ReqID, normalizer.MaxA2EType)
		}
		if strings.Contains(err.Error(), strings.Repeat("x", 100)) {
			t.Errorf("%s: the message echoes the type: %.200q", name, err.Error())
		}
		checkBoundedMessage(t, err.Error())
	}
	for _, typ := range []string{"x/req", "my tool/req", longID(normalizer.MaxA2EType)} {
		res, err := n.FromA2E(normalizer.Input{Body: []byte(`{"id":"c1","type":"` + typ + `","req_id":"r1"}`)})
		if err != nil || res.Envelope.Method != typ {
			t.Errorf("type %.40q: %v", typ, err)
		}
	}
}

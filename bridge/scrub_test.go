package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

const leakedKey = "sk-upstream-0123456789abcdef"

// leaky is an upstream whose agent quotes the request's credentials in
// the error it answers, in one of the ways an upstream can answer one.
type leaky struct{ answer func(w agent.Writer) error }

func (l *leaky) Name() string { return "leaky http://upstream" }

func (l *leaky) Call(_ context.Context, _ *e2a.Envelope, w agent.Writer) error { return l.answer(w) }

// Scrub is what the bridges' Client.Scrub does for a client holding
// leakedKey.
func (l *leaky) Scrub(s string) string { return strings.ReplaceAll(s, leakedKey, "[redacted]") }

var _ Scrubber = (*leaky)(nil)

// TestErrorFramesScrubbed: whatever way an upstream's error reaches the
// request's frames (an *Error returned, a failure written, an e2a.error
// frame written through as an HTTP agent's), the upstream's credentials
// are taken out of it.
func TestErrorFramesScrubbed(t *testing.T) {
	quoted := "refused: Authorization: Bearer " + leakedKey
	raw, err := json.Marshal(e2a.ErrorBody{Code: "upstream", Message: quoted})
	if err != nil {
		t.Fatal(err)
	}
	for name, answer := range map[string]func(w agent.Writer) error{
		"returned error": func(agent.Writer) error { return Errorf(CodeAuth, false, "%s", quoted) },
		"Fail (an A2A task failed with the agent's message)": func(w agent.Writer) error {
			return w.Fail(CodeFailed, quoted, false)
		},
		"e2a.error frame, raw JSON (an HTTP agent's)": func(w agent.Writer) error {
			return w.Write(e2a.KindError, "", json.RawMessage(raw), true)
		},
		"e2a.error frame, ErrorBody": func(w agent.Writer) error {
			return w.Write(e2a.KindError, "", e2a.ErrorBody{Code: "upstream", Message: quoted}, true)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := newTestHandler(t, &leaky{answer: answer}, WithMetrics(prometheus.NewRegistry()))
			w := &agenttest.Writer{}
			err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, w)
			var ae *agent.Error
			if errors.As(err, &ae) && strings.Contains(ae.Message, leakedKey) {
				t.Errorf("the returned error shows the key: %q", ae.Message)
			}
			for _, f := range w.Frames() {
				b, _ := json.Marshal(f)
				if strings.Contains(string(b), leakedKey) {
					t.Errorf("a written frame shows the key: %s", b)
				}
				if f.ResponseKind == e2a.KindError && !strings.Contains(string(b), "[redacted]") {
					t.Errorf("the error frame lost its message: %s", b)
				}
			}
		})
	}

}

package a2abridge_test

import (
	"context"
	"iter"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// refusingAgent refuses every message with an A2A invalid-params error
// whose message is its text.
type refusingAgent struct{ text string }

func (r refusingAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(nil, a2a.NewError(a2a.ErrInvalidParams, r.text))
	}
}

func (refusingAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// TestLongRefusalCut: an agent's refusal of 256 KiB of words (an A2A
// error's message, which a2a-go reads with the answer) ends the request
// with its code and the start of its words, cut to bridge.MaxErrorMessage
// characters: it was quoted whole into the e2a.error frame (and the
// bridge's log line), as large as the frame bound allowed.
func TestLongRefusalCut(t *testing.T) {
	t.Parallel()
	words := "no such skill: " + strings.Repeat("x", 256<<10)
	url, _ := startV1(t, refusingAgent{words})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
	f := a.Final()
	if code, _ := a.ErrorCode(); code != bridge.CodeRejected {
		t.Fatalf("final frame %s (%s), want e2a.error %s", kindOf(f), code, bridge.CodeRejected)
	}
	b, _ := f.Error()
	if n := utf8.RuneCountInString(b.Message); n > bridge.MaxErrorMessage+1 || !strings.Contains(b.Message, "no such skill: xxx") || !strings.HasSuffix(b.Message, "…") {
		t.Fatalf("error message of %d characters (%q…), want the refusal's start cut to %d", n, b.Message[:min(80, len(b.Message))], bridge.MaxErrorMessage)
	}
	if len(f.Body) > 8<<10 {
		t.Fatalf("e2a.error frame of %d bytes", len(f.Body))
	}
}

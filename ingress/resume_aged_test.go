package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestResumeAfterEarlyFramesAgedOut: a long answer's first frames
// leave E2A_RESPONSES (DiscardOld at ResponsesMaxBytes, or MaxAge) while
// its last ones are still held. A client that lost its connection just
// before the final frame resumes there: everything it asks for is in the
// stream, and it gets the task's end. The frames before the resume point
// are given to the stream's mapper as its reader meets them (withBefore),
// those that are left, with no read from the first frame that would take
// the missing start for a hole.
func TestResumeAfterEarlyFramesAgedOut(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("answers")))
	p.Pool("answers", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for _, s := range []string{"The ", "answer ", "is ", "42."} {
			if err := w.Chunk(e2a.DeltaText, s); err != nil {
				return err
			}
			if err := w.Sync(); err != nil { // each chunk a stored message of its own
				return err
			}
		}
		return w.Complete("The answer is 42.")
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range []followedCall{
		{"v03", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","role":"user",` +
			`"messageId":"m-aged-v03","parts":[{"kind":"text","text":"the answer?"}]}}}`, []string{"Idempotency-Key", "aged-v03"}},
		{"v1-rest", "/a2a/v1/message:stream", `{"message":{"role":"ROLE_USER","messageId":"m-aged-rest","parts":[{"text":"the answer?"}]}}`,
			[]string{"A2A-Version", "1.0", "Idempotency-Key", "aged-rest"}},
	} {
		resp := openCall(t, ctx, p.URL, c)
		whole := readSSE(t, resp.Body)
		resp.Body.Close()
		ids := eventIDs(whole)
		if len(ids) < 3 {
			t.Fatalf("%s: %d events with an id:\n%s", c.name, len(ids), sseLines(whole))
		}
		// The request's oldest frames age out: its last chunk and the
		// final frame stay (the only request in the stream now).
		s, err := p.JS.Stream(ctx, streams.ResponsesStream)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Purge(ctx, jetstream.WithPurgeKeep(2)); err != nil {
			t.Fatal(err)
		}
		after := ids[len(ids)-2] // the last chunk's event: the final frame is next
		resp = openCall(t, ctx, p.URL, c, "Last-Event-ID", after)
		rest := readSSE(t, resp.Body)
		resp.Body.Close()
		lines := sseLines(rest)
		if !strings.Contains(strings.ToLower(lines), "completed") || strings.Contains(lines, `"error"`) {
			t.Errorf("%s resumed after %s (held in the stream): want the task's end, got\n%s", c.name, after, lines)
		}
	}
}

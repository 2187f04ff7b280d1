package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// resumeAnswer is what the agent of TestResumeBeforeFinalFrame streams,
// in two chunks, and then completes with as its result (as a model
// bridge or the demo agent does: the whole answer again).
const resumeAnswer = "The answer is 42."

// TestResumeBeforeFinalFrame: an A2A stream whose connection drops after
// the agent's last chunk, before the final frame, and is resumed there
// (the same call re-posted with Last-Event-ID: the last event it got)
// gets the task's end, not the answer again. The final e2a.complete
// repeats the streamed text as its result; a stream that saw no content
// sends that result as the answer's artifact, but this client saw the
// content before its resume point: sent again, a v0.3 client appends it
// to what it has (append: true) and shows the answer twice. Resumed after
// its first chunk instead, the stream gives the rest of the text once.
// In A2A v0.3 (message/stream) and v1.0 (JSON-RPC and HTTP+JSON).
func TestResumeBeforeFinalFrame(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("answers")))
	p.Pool("answers", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "The answer "); err != nil {
			return err
		}
		if err := w.Chunk(e2a.DeltaText, "is 42."); err != nil {
			return err
		}
		return w.Complete(resumeAnswer)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	calls := []followedCall{
		{"v03", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","role":"user",` +
			`"messageId":"m-v03","parts":[{"kind":"text","text":"the answer?"}]}}}`, []string{"Idempotency-Key", "resume-v03"}},
		{"v1-jsonrpc", "/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER",` +
			`"messageId":"m-v1","parts":[{"text":"the answer?"}]}}}`, []string{"A2A-Version", "1.0", "Idempotency-Key", "resume-v1"}},
		{"v1-rest", "/a2a/v1/message:stream", `{"message":{"role":"ROLE_USER","messageId":"m-rest","parts":[{"text":"the answer?"}]}}`,
			[]string{"A2A-Version", "1.0", "Idempotency-Key", "resume-rest"}},
	}
	for _, c := range calls {
		resp := openCall(t, ctx, p.URL, c)
		whole := readSSE(t, resp.Body)
		resp.Body.Close()
		if got := streamedText(t, whole); got != resumeAnswer {
			t.Fatalf("%s: the whole stream's text %q, want %q\n%s", c.name, got, resumeAnswer, sseLines(whole))
		}
		// The events with an id, in order: the last is the final status.
		ids := eventIDs(whole)
		if len(ids) < 2 {
			t.Fatalf("%s: %d events with an id:\n%s", c.name, len(ids), sseLines(whole))
		}
		for _, r := range []struct {
			after, want string
		}{{ids[len(ids)-2], ""}, {ids[0], "is 42."}} {
			resp := openCall(t, ctx, p.URL, c, "Last-Event-ID", r.after)
			rest := readSSE(t, resp.Body)
			resp.Body.Close()
			if got := streamedText(t, rest); got != r.want {
				t.Errorf("%s resumed after event %s: the text %q, want %q (the client has the rest)\n%s", c.name, r.after, got, r.want, sseLines(rest))
			}
			if !strings.Contains(sseLines(rest), "ompleted") && !strings.Contains(sseLines(rest), "COMPLETED") {
				t.Errorf("%s resumed after event %s: no completed status\n%s", c.name, r.after, sseLines(rest))
			}
		}
	}
}

// streamedText is the text of the artifact-updates of an A2A stream's
// events (v0.3 or v1.0, JSON-RPC or HTTP+JSON), in order.
func streamedText(t *testing.T, evs []sseEvent) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		var m struct {
			Result         json.RawMessage `json:"result"`
			ArtifactUpdate json.RawMessage `json:"artifactUpdate"`
		}
		if err := json.Unmarshal(ev.data, &m); err != nil {
			t.Fatalf("event %s: %v: %s", ev.id, err, ev.data)
		}
		raw := m.ArtifactUpdate
		if len(m.Result) > 0 {
			var r struct {
				Kind           string          `json:"kind"`
				ArtifactUpdate json.RawMessage `json:"artifactUpdate"`
			}
			_ = json.Unmarshal(m.Result, &r)
			switch {
			case r.Kind == "artifact-update":
				raw = m.Result
			case len(r.ArtifactUpdate) > 0:
				raw = r.ArtifactUpdate
			}
		}
		if len(raw) == 0 {
			continue
		}
		var u struct {
			Artifact struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"artifact"`
		}
		if err := json.Unmarshal(raw, &u); err != nil {
			t.Fatalf("event %s: %v: %s", ev.id, err, raw)
		}
		for _, p := range u.Artifact.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// eventIDs are the ids of the events that have one, in order.
func eventIDs(evs []sseEvent) []string {
	var ids []string
	for _, ev := range evs {
		if ev.id != "" {
			ids = append(ids, ev.id)
		}
	}
	return ids
}

package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestFramesScrubbed: every frame an upstream fills with its own words
// (its errors of any kind, its final frames, an interrupt's question, its
// status messages, anything not the answer's streamed content) has the
// upstream's credentials taken out, written as they are or escaped.
func TestFramesScrubbed(t *testing.T) {
	quoted := "refused: Authorization: Bearer " + leakedKey
	q, _ := json.Marshal(quoted)
	for name, answer := range map[string]func(w agent.Writer) error{
		"acp.jsonrpc_error frame (an HTTP agent's)": func(w agent.Writer) error {
			return w.Write(e2a.KindACPJSONRPCErr, e2a.StatusFailed, json.RawMessage(`{"code":-32000,"message":`+string(q)+`}`), true)
		},
		"interrupt (an A2A agent's auth-required message)": func(w agent.Writer) error {
			return agent.Interrupt(w, e2a.StateAuthRequired, quoted)
		},
		"final a2a.stream_event, raw": func(w agent.Writer) error {
			b, _ := json.Marshal(e2a.InterruptBody(e2a.StateInputRequired, quoted))
			return w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, json.RawMessage(b), true)
		},
		"status_update while working, raw": func(w agent.Writer) error {
			if err := w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress,
				json.RawMessage(`{"branch":"status_update","payload":{"kind":"status-update","status":{"state":"working","message":{"kind":"message","role":"agent","parts":[{"kind":"text","text":`+string(q)+`}]}},"final":false}}`), false); err != nil {
				return err
			}
			return w.Complete(nil)
		},
		"ext frame": func(w agent.Writer) error {
			if err := w.Write(e2a.KindExt, e2a.StatusInProgress, e2a.ExtBody{ExtMethod: "x/log", Params: map[string]any{"line": quoted}}, false); err != nil {
				return err
			}
			return w.Complete(nil)
		},
		"final e2a.complete frame, raw": func(w agent.Writer) error {
			return w.Write(e2a.KindComplete, e2a.StatusSucceeded, json.RawMessage(`{"result":{"error":`+string(q)+`}}`), true)
		},
		"Complete of a raw result (an HTTP agent's JSON answer)": func(w agent.Writer) error {
			return w.Complete(json.RawMessage(`{"error":` + string(q) + `}`))
		},
		"e2a.error frame, the key \\u-escaped": func(w agent.Writer) error {
			esc := strings.Replace(leakedKey, "-", `\u002d`, 1)
			return w.Write(e2a.KindError, e2a.StatusFailed, json.RawMessage(`{"code":"upstream","message":"refused: `+esc+`"}`), true)
		},
		"e2a.error frame, the key in details": func(w agent.Writer) error {
			return w.Write(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: "upstream", Message: "refused",
				Details: map[string]any{"header": quoted}}, true)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := newTestHandler(t, &leaky{answer: answer}, WithMetrics(prometheus.NewRegistry()))
			w := &agenttest.Writer{}
			if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, w); err != nil {
				t.Fatal(err)
			}
			redacted := false
			for _, f := range w.Frames() {
				b, _ := json.Marshal(f)
				if strings.Contains(string(b), leakedKey) {
					t.Errorf("a written frame shows the key: %s", b)
				}
				redacted = redacted || strings.Contains(string(b), "[redacted]")
			}
			if !redacted {
				t.Errorf("no frame kept the message, redacted: %v", w.Kinds())
			}
		})
	}
}

// TestMetadataScrubbed: the metadata an upstream sets for its frames (an
// HTTP agent's frames carry their own) has the upstream's credentials
// taken out, its other values (numbers too) kept as they were.
func TestMetadataScrubbed(t *testing.T) {
	quoted := "Bearer " + leakedKey
	h, _ := newTestHandler(t, &leaky{answer: func(w agent.Writer) error {
		if err := w.SetMetadata(map[string]any{"received": quoted, "n": json.Number("12345678901234567890")}); err != nil {
			return err
		}
		return w.Complete(nil)
	}}, WithMetrics(prometheus.NewRegistry()))
	w := &agenttest.Writer{}
	if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, w); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(w.Metadata())
	if string(b) != `{"n":12345678901234567890,"received":"Bearer [redacted]"}` {
		t.Errorf("metadata %s, want the key redacted and the rest kept", b)
	}
}

// countingScrubber is an upstream that counts its Scrub calls.
type countingScrubber struct {
	leaky
	calls atomic.Int64
}

func (c *countingScrubber) Scrub(s string) string {
	c.calls.Add(1)
	return c.leaky.Scrub(s)
}

// TestContentNotScanned: the answer's streamed content (text deltas, as
// Chunk or as e2a.chunk frames, ACP session updates, the A2A bridge's
// artifact parts) and a result built from it are written without a scan
// (the hot path: a frame per token or so; see scrubframes.go). Only the
// frames an upstream fills with its own words are.
func TestContentNotScanned(t *testing.T) {
	up := &countingScrubber{}
	up.answer = func(w agent.Writer) error {
		for _, write := range []func() error{
			func() error { return w.Chunk(e2a.DeltaText, "Hello, ") },
			func() error {
				return w.Write(e2a.KindChunk, e2a.StatusInProgress, json.RawMessage(`{"delta_kind":"text","delta":"world"}`), false)
			},
			func() error {
				return w.Write(e2a.KindACPSessionUpd, e2a.StatusInProgress, json.RawMessage(`{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"!"}}}`), false)
			},
			func() error {
				return w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate,
					Payload: map[string]any{"kind": "artifact-update", "artifact": map[string]any{"artifactId": "a", "parts": []any{}}}}, false)
			},
			func() error { return w.Complete(map[string]any{"text": "Hello, world!"}) },
		} {
			if err := write(); err != nil {
				return err
			}
		}
		return nil
	}
	h, _ := newTestHandler(t, up, WithMetrics(prometheus.NewRegistry()))
	w := &agenttest.Writer{}
	if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, w); err != nil {
		t.Fatal(err)
	}
	if len(w.Frames()) != 5 {
		t.Fatalf("frames %v", w.Kinds())
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the answer's content was scanned %d times", n)
	}
}

// BenchmarkScrubFrame measures what a scan with a Client's Scrub (an API
// key and a header) costs per frame, for the choice in scrubframes.go: a
// text delta and a raw e2a.chunk frame (not scanned: what scanning them
// would cost), a final raw frame and an interrupt (scanned).
func BenchmarkScrubFrame(b *testing.B) {
	c, err := NewClient("http://upstream", WithCredentials(Credentials{APIKey: leakedKey, Headers: map[string]string{"X-Tenant": "tenant-secret-1"}}))
	if err != nil {
		b.Fatal(err)
	}
	delta := strings.Repeat("word ", 20) // a 100 B chunk, as docs/performance.md's bench writes
	b.Run("text delta", func(b *testing.B) {
		for b.Loop() {
			_ = c.Scrub(delta)
		}
	})
	chunk := json.RawMessage(`{"delta_kind":"text","delta":"` + delta + `"}`)
	b.Run("raw chunk frame", func(b *testing.B) {
		for b.Loop() {
			_ = scrubBody(chunk, c.Scrub)
		}
	})
	final := json.RawMessage(`{"result":{"text":"` + strings.Repeat("word ", 200) + `"}}`)
	b.Run("final raw frame 1 KB", func(b *testing.B) {
		for b.Loop() {
			_ = scrubBody(final, c.Scrub)
		}
	})
	body := e2a.InterruptBody(e2a.StateInputRequired, delta)
	b.Run("interrupt typed body", func(b *testing.B) {
		for b.Loop() {
			_ = scrubBody(body, c.Scrub)
		}
	})
}

package demo_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// lines are w's frames as "kind status body[ final]".
func lines(w *agenttest.Writer) []string {
	var out []string
	for _, f := range w.Frames() {
		out = append(out, f.ResponseKind+" "+f.Status+" "+string(f.Body)+map[bool]string{true: " final"}[f.IsFinal])
	}
	return out
}

func env(params map[string]any) *e2a.Envelope {
	return &e2a.Envelope{RequestID: "r1", Params: params}
}

func run(t *testing.T, h agent.Handler, e *e2a.Envelope, resume int64) []string {
	t.Helper()
	w := &agenttest.Writer{Env: e, Stored: resume + 1}
	if err := h.Serve(context.Background(), e, w); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return lines(w)
}

func TestPieces(t *testing.T) {
	for _, c := range []struct {
		text string
		n    int
	}{{"hello world", 5}, {"", 3}, {"héllo wörld ✓", 7}, {"x", 40}, {strings.Repeat("ab", 100), 1}} {
		p := demo.Pieces(c.text, c.n)
		if len(p) != c.n {
			t.Fatalf("%q/%d: %d pieces", c.text, c.n, len(p))
		}
		joined := strings.Join(p, "")
		if !strings.HasPrefix(joined, "You said: "+c.text) || !utf8.ValidString(joined) {
			t.Fatalf("%q/%d: joined %q", c.text, c.n, joined)
		}
		for _, s := range p {
			if s == "" {
				t.Fatalf("%q/%d: empty piece", c.text, c.n)
			}
		}
	}
}

// The demo streams reasoning, a tool call and its response, N text chunks,
// then completes with the text; a resumed run writes exactly the tail of a
// fresh run.
func TestDemoScriptAndResume(t *testing.T) {
	e := env(map[string]any{"text": "hi there", "frames": json.Number("4")})
	full := run(t, demo.New(), e, -1)
	if len(full) != 3+4+1 {
		t.Fatalf("%d frames: %v", len(full), full)
	}
	for i, want := range []string{`"delta_kind":"reasoning"`, `"type":"function_call"`, `"type":"function_response"`, `"delta_kind":"text"`} {
		if !strings.Contains(full[i], want) {
			t.Errorf("frame %d %s lacks %s", i, full[i], want)
		}
	}
	if !strings.Contains(full[7], `{"result":{"content":"You said: hi there"}} final`) {
		t.Errorf("final %s", full[7])
	}
	if again := run(t, demo.New(), e, -1); !reflect.DeepEqual(full, again) {
		t.Fatal("output not deterministic")
	}
	for k := int64(0); k < int64(len(full)-1); k++ { // never resumed after the final frame
		if tail := run(t, demo.New(), e, k); !reflect.DeepEqual(tail, full[k+1:]) {
			t.Fatalf("resumed after %d: %v, want %v", k, tail, full[k+1:])
		}
	}
	if r, ok := demo.New().(agent.Resumer); !ok || !r.Resumable() {
		t.Fatal("demo is not resumable")
	}
}

func TestDemoFailAndEcho(t *testing.T) {
	fr := run(t, demo.New(), env(map[string]any{"fail": "quota", "fail_after": 2, "retryable": true}), -1)
	if len(fr) != 3 || !strings.Contains(fr[2], `"code":"quota"`) || !strings.Contains(fr[2], `"retryable":true`) {
		t.Fatalf("fail: %v", fr)
	}
	fr = run(t, demo.Echo(), env(map[string]any{"content": "echo me"}), -1)
	if len(fr) != 2 || !strings.Contains(fr[0], `"delta":"echo me"`) || !strings.Contains(fr[1], `"content":"echo me"`) {
		t.Fatalf("echo: %v", fr)
	}
	if fr = run(t, demo.Echo(), env(map[string]any{"text": "x"}), 0); len(fr) != 1 {
		t.Fatalf("echo resumed: %v", fr)
	}
	p := env(map[string]any{"prompt": []any{map[string]any{"type": "text", "text": "from prompt"}}})
	if demo.Text(p) != "from prompt" {
		t.Fatalf("Text from prompt blocks: %q", demo.Text(p))
	}
	// Spec §11.5's request has its text in content_blocks alone: the demo
	// answered it "You said: ".
	cb := env(map[string]any{"content_blocks": []any{map[string]any{"type": "text", "text": "Describe this image"},
		map[string]any{"type": "image", "mime_type": "image/png", "data": "<base64 omitted>"}}})
	if demo.Text(cb) != "Describe this image" {
		t.Fatalf("Text from content_blocks: %q", demo.Text(cb))
	}
}

func TestDemoStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(agent.ErrCancelled)
	err := demo.New().Serve(ctx, env(map[string]any{"delay_ms": 1000}), &agenttest.Writer{})
	if err != agent.ErrCancelled {
		t.Fatalf("Serve on a cancelled context: %v", err)
	}
}

// TestDemoPaceFromA2AMetadata: frames and delay_ms come from the A2A
// message metadata when params lack them (A2A clients cannot pass params).
func TestDemoPaceFromA2AMetadata(t *testing.T) {
	e := env(map[string]any{"text": "hi"})
	e.A2AMetadata = map[string]any{"frames": float64(2), "delay_ms": "60000"}
	if got := run(t, demo.New(), &e2a.Envelope{RequestID: "r1", Params: e.Params, A2AMetadata: map[string]any{"frames": float64(2)}}, -1); len(got) != 3+2+1 {
		t.Fatalf("%d frames: %v", len(got), got)
	}
	// params win over the metadata.
	e2 := env(map[string]any{"text": "hi", "frames": json.Number("1")})
	e2.A2AMetadata = map[string]any{"frames": float64(7)}
	if got := run(t, demo.New(), e2, -1); len(got) != 3+1+1 {
		t.Fatalf("%d frames: %v", len(got), got)
	}
	// delay_ms from the metadata: the agent waits between frames until it
	// is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	r := &agenttest.Writer{}
	done := make(chan error, 1)
	go func() { done <- demo.New().Serve(ctx, e, r) }()
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("a 60s pace finished at once: %v", lines(r))
	}
	if len(r.Frames()) > 1 {
		t.Fatalf("frames written without the metadata's pace: %v", lines(r))
	}
}

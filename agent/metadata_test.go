package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestSetMetadata: frames written after SetMetadata carry its metadata,
// text coalesced before it keeps the metadata it was written under, and
// SetMetadata(nil) removes it; the text is whole and in order.
func TestSetMetadata(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range 50 {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprintf("a%02d ", i)); err != nil {
				return err
			}
		}
		if err := w.SetMetadata(map[string]any{"llm_response_id": "chatcmpl-1"}); err != nil {
			return err
		}
		for i := range 50 {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprintf("b%02d ", i)); err != nil {
				return err
			}
		}
		if err := w.SetMetadata(map[string]any{"bad": make(chan int)}); err == nil {
			return fmt.Errorf("metadata that does not encode was accepted")
		}
		if err := w.SetMetadata(nil); err != nil {
			return err
		}
		return w.Complete(map[string]any{"ok": true})
	})
	startWorker(t, s.connect(t), "meta", h)
	waitConsumer(t, s.js, "meta")
	publish(t, s.js, "meta", request("meta-1", nil))
	frames := waitFinal(t, s.nc, "meta-1", 30*time.Second)
	var want string
	for i := range 50 {
		want += fmt.Sprintf("a%02d ", i)
	}
	for i := range 50 {
		want += fmt.Sprintf("b%02d ", i)
	}
	if got := text(t, frames); got != want {
		t.Fatalf("text = %q, want %q", got, want)
	}
	for _, f := range frames {
		id, _ := f.Metadata["llm_response_id"].(string)
		switch {
		case f.IsFinal:
			if f.Metadata != nil {
				t.Errorf("final frame metadata = %v, want none after SetMetadata(nil)", f.Metadata)
			}
		default:
			c, err := f.Chunk()
			if err != nil {
				t.Fatal(err)
			}
			s := c.Delta.(string)
			hasA, hasB := containsPrefix(s, "a"), containsPrefix(s, "b")
			if hasA && hasB {
				t.Errorf("frame %d mixes text written before and after SetMetadata: %q", f.Sequence, s)
			}
			if hasB != (id == "chatcmpl-1") {
				t.Errorf("frame %d (%q) has llm_response_id %q", f.Sequence, s, id)
			}
		}
	}
}

func containsPrefix(s, p string) bool {
	for i := 0; i+len(p) <= len(s); i++ {
		if (i == 0 || s[i-1] == ' ') && s[i:i+len(p)] == p {
			return true
		}
	}
	return false
}

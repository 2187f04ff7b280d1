package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
)

// boundedWriter writes nothing and refuses, as the runtime's writer does,
// a final frame larger than its frame bound (agent.FrameBounder); it keeps
// the results of the final frames asked for.
type boundedWriter struct {
	nopWriter
	max     int64
	results []any
}

func (w *boundedWriter) MaxFrameBytes() int64 { return w.max }

func (w *boundedWriter) Complete(res any) error {
	w.results = append(w.results, res)
	if r, ok := res.(finalResult); ok {
		if n, _ := r.JSONLen(); n > w.max {
			return agent.ErrFrameTooLarge
		}
	}
	return nil
}

// TestContentNotKeptPastAFrame: an answer's text larger than a frame
// (which the final frame then omits) is not kept to the answer's end.
// The upstream streams 32 MiB of small content deltas and, before its
// finish reason, measures the heap that stays live after a collection:
// the bridge held the whole text (at least the 32 MiB, in a builder of up
// to twice that), now it holds none past the writer's 64 KiB frame bound.
// The final frame is the result without the content, asked for once.
func TestContentNotKeptPastAFrame(t *testing.T) {
	const total = 32 << 20
	delta := strings.Repeat("tok ", 16) // 64 bytes
	event := `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + delta + `"},"finish_reason":null}]}` + "\n\n"
	var before, during runtime.MemStats
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		batch := strings.Repeat(event, 256)
		for sent := 0; sent < total; sent += 256 * len(delta) {
			if _, err := w.Write([]byte(batch)); err != nil {
				return
			}
		}
		w.(http.Flusher).Flush()
		runtime.GC()
		runtime.ReadMemStats(&during)
		_, _ = fmt.Fprint(w, chunkLine(`{}`, "stop")+"data: [DONE]\n\n")
	}))
	u := upstreamAt(t, srv)
	w := &boundedWriter{max: 64 << 10}
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := u.Call(context.Background(), benchEnvelope(), w); err != nil {
		t.Fatal(err)
	}
	live := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("live heap during the answer of %d MiB: %+d KiB", total>>20, live>>10)
	if live > total/4 {
		t.Errorf("live heap grew %d MiB during an answer of %d MiB: its text kept", live>>20, total>>20)
	}
	if len(w.results) != 1 {
		t.Fatalf("%d final frames asked for, want 1 (without the content)", len(w.results))
	}
	if m, ok := w.results[0].(map[string]any); !ok || m["content_omitted"] == nil || m["finish_reason"] != "stop" {
		t.Errorf("final result %v, want content_omitted", w.results[0])
	}
}

package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// nopWriter is an agent.Writer that allocates nothing.
type nopWriter struct{}

func (nopWriter) Chunk(string, any) error               { return nil }
func (nopWriter) Complete(any) error                    { return nil }
func (nopWriter) Fail(string, string, bool) error       { return nil }
func (nopWriter) Write(string, string, any, bool) error { return nil }
func (nopWriter) SetMetadata(map[string]any) error      { return nil }
func (nopWriter) ResumeAfter() int64                    { return -1 }
func (nopWriter) Sync() error                           { return nil }

// answering is a Scrubber Upstream that answers as the OpenAI bridge does:
// the completion's id as the frames' metadata, a text delta, a final
// result that is a struct reporting its usage.
type answering struct {
	meta   map[string]any
	result finalLike
}

// finalLike is a final result as the OpenAI bridge writes it.
type finalLike struct {
	Content      string          `json:"content"`
	FinishReason string          `json:"finish_reason"`
	Model        string          `json:"model"`
	Usage        json.RawMessage `json:"usage,omitempty"`
}

func (r finalLike) ReportedUsage() (string, json.RawMessage) { return r.Model, r.Usage }

func (a *answering) Name() string { return "openai http://upstream" }

func (a *answering) Scrub(s string) string { return strings.ReplaceAll(s, "sk-secret", "[redacted]") }

func (a *answering) Call(_ context.Context, _ *e2a.Envelope, w agent.Writer) error {
	if err := w.SetMetadata(a.meta); err != nil {
		return err
	}
	if err := w.Chunk(e2a.DeltaText, "hello"); err != nil {
		return err
	}
	return w.Complete(a.result)
}

// TestServeAllocs: the Handler's own work around an upstream call that
// answers (its slot, metrics, the bound on the answer's bytes, the
// counting writer, the metadata's scrub and size, the tokens counted)
// allocates little: it is paid once per bridged request. 26 allocations
// before (the writer's callbacks as closures, the Scrub method value, an
// error variable on the heap for a call without error, the metadata
// encoded twice by encoding/json, a failed decoding of each usage detail
// object the upstream did not send); 7 now, one of them this upstream's.
func TestServeAllocs(t *testing.T) {
	up := &answering{meta: map[string]any{"llm_response_id": "chatcmpl-0123456789"},
		result: finalLike{Content: strings.Repeat("hello world ", 60), FinishReason: "stop", Model: "m",
			Usage: json.RawMessage(`{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}`)}}
	h, err := New("p", up, WithLogger(slog.New(slog.DiscardHandler)), WithMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env := &e2a.Envelope{RequestID: "r1"}
	if err := h.Serve(ctx, env, nopWriter{}); err != nil { // the series made
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(200, func() {
		if err := h.Serve(ctx, env, nopWriter{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Serve: %v allocations", n)
	if n > 7 && !raceEnabled {
		t.Errorf("Serve: %v allocations, want at most 7", n)
	}
}

// TestPlainStringMap: metadata of strings is encoded as encoding/json
// encodes it, with HTML escaping (json.Marshal: its size) and without
// (scrubBody: what is scrubbed), whatever the strings hold; metadata that
// is not strings only, or holds an HTML character, is left to
// encoding/json.
func TestPlainStringMap(t *testing.T) {
	hostile := []string{"", "chatcmpl-1", `q"uote`, `back\\slash`, "line\nfeed\t\r\b\f\x01\x1f", "caf\u00e9 \u2028 \u2029",
		"bad \xff utf8 \xc3", "emoji \U0001F600", "sk-secret"}
	for _, a := range hostile {
		for _, b := range hostile {
			m := map[string]any{"llm_response_id": a, a: b, "z" + b: a}
			got, ok := plainStringMap(m)
			if !ok {
				t.Fatalf("%q: not plain", m)
			}
			want, _ := json.Marshal(m)
			var buf strings.Builder
			e := json.NewEncoder(&buf)
			e.SetEscapeHTML(false)
			_ = e.Encode(m)
			if string(got) != string(want) || string(got)+"\n" != buf.String() {
				t.Errorf("%q: %s, want %s (escaping off: %s)", m, got, want, buf.String())
			}
		}
	}
	for _, m := range []map[string]any{nil, {}, {"a": "<b>"}, {"a&": "b"}, {"n": 1}, {"o": map[string]any{}}, {"s": "x", "n": nil}} {
		if _, ok := plainStringMap(m); ok {
			t.Errorf("%v taken as plain", m)
		}
	}
}

// TestPlainMetadataScrubbed: metadata of strings only, encoded by
// plainStringMap, is scrubbed as any other (key and value), and its
// size counted against the answer's bound is its encoding's.
func TestPlainMetadataScrubbed(t *testing.T) {
	quoted := "Bearer " + leakedKey
	h, _ := newTestHandler(t, &leaky{answer: func(w agent.Writer) error {
		if err := w.SetMetadata(map[string]any{"received": quoted, quoted: "k", "id": "chatcmpl-1"}); err != nil {
			return err
		}
		cw := w.(*countingWriter)
		b, _ := json.Marshal(map[string]any{"received": "Bearer [redacted]", "Bearer [redacted]": "k", "id": "chatcmpl-1"})
		if cw.meta != int64(len(b)) {
			t.Errorf("metadata counted %d bytes, want %d", cw.meta, len(b))
		}
		if err := w.SetMetadata(map[string]any{"id": "chatcmpl-2"}); err != nil {
			return err
		}
		if want := int64(len(`{"id":"chatcmpl-2"}`)); cw.meta != want {
			t.Errorf("metadata counted %d bytes, want %d", cw.meta, want)
		}
		if err := w.SetMetadata(map[string]any{"received": quoted}); err != nil {
			return err
		}
		return w.Complete(nil)
	}}, WithMetrics(prometheus.NewRegistry()))
	w := &agenttest.Writer{}
	if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, w); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(w.Metadata())
	if string(b) != `{"received":"Bearer [redacted]"}` {
		t.Errorf("metadata %s, want the key redacted", b)
	}
}

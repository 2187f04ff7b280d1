package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// usageUp is an Upstream that ends each call with final: the request's
// id is the model it reports.
type usageUp struct {
	final func(w agent.Writer, model string) error
}

func (u *usageUp) Name() string { return "test http://upstream" }

func (u *usageUp) Call(_ context.Context, env *e2a.Envelope, w agent.Writer) error {
	return u.final(w, env.RequestID)
}

// tooLargeOnce refuses the first final frame as too large, as the runtime's
// writer does a final frame past max_payload.
type tooLargeOnce struct {
	recWriter
	refused bool
}

func (w *tooLargeOnce) Complete(r any) error {
	if !w.refused {
		w.refused = true
		return agent.ErrFrameTooLarge
	}
	return w.recWriter.Complete(r)
}

// tokenSeries is e2a_bridge_tokens_total of pool p by "model kind".
func tokenSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range testkit.Series(t, reg, "e2a_bridge_tokens_total") {
		out[m.Labels["model"]+" "+m.Labels["kind"]] = m.Value
	}
	return out
}

// TestTokensFromAnyResult: the generic layer reads the usage of a final
// result whatever the upstream kind writes it as (a bridge's map holding
// the raw usage or a decoded one, an HTTP agent's JSON answer, an HTTP
// agent's own e2a.complete frame), once per request even when the final
// frame is written twice (the OpenAI bridge's retry of a frame too large);
// a result without usage, a count that is not a non-negative integer, a
// usage that is not an object count nothing; a model that is no valid
// UTF-8 is labelled valid, an empty one "unknown"; keys written with
// escapes or repeated are read as encoding/json reads them.
func TestTokensFromAnyResult(t *testing.T) {
	usage := json.RawMessage(`{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}`)
	for _, c := range []struct {
		name  string
		final func(w agent.Writer, model string) error
		w     agent.Writer
		want  string
	}{
		{"map raw usage", func(w agent.Writer, m string) error {
			return w.Complete(map[string]any{"model": m, "usage": usage})
		}, &recWriter{}, "map[m completion:3 m prompt:5]"},
		{"map decoded usage", func(w agent.Writer, m string) error {
			return w.Complete(map[string]any{"model": m, "usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 2,
				"prompt_tokens_details": map[string]any{"cached_tokens": 1}, "completion_tokens_details": nil}})
		}, &recWriter{}, "map[m cached_prompt:1 m completion:2 m prompt:1]"},
		{"JSON answer", func(w agent.Writer, m string) error {
			return w.Complete(json.RawMessage(`{"answer":"hi","model":"` + m + `","usage":` + string(usage) + `}`))
		}, &recWriter{}, "map[m completion:3 m prompt:5]"},
		{"agent's complete frame", func(w agent.Writer, m string) error {
			return w.Write(e2a.KindComplete, e2a.StatusSucceeded,
				json.RawMessage(`{"result":{"model":"`+m+`","usage":{"prompt_tokens":2,"completion_tokens":9}}}`), true)
		}, &recWriter{}, "map[m completion:9 m prompt:2]"},
		{"final frame retried", func(w agent.Writer, m string) error {
			r := map[string]any{"model": m, "usage": usage}
			if err := w.Complete(r); err != agent.ErrFrameTooLarge {
				return fmt.Errorf("first complete: %w", err)
			}
			return w.Complete(r)
		}, &tooLargeOnce{}, "map[m completion:3 m prompt:5]"},
		{"no usage", func(w agent.Writer, m string) error {
			return w.Complete(map[string]any{"model": m, "content": "x"})
		}, &recWriter{}, "map[]"},
		{"text result", func(w agent.Writer, _ string) error { return w.Complete("usage") }, &recWriter{}, "map[]"},
		{"bad counts", func(w agent.Writer, m string) error {
			return w.Complete(map[string]any{"model": m, "usage": json.RawMessage(
				`{"prompt_tokens":-1,"completion_tokens":2.5,"prompt_tokens_details":{"cached_tokens":"3"},"completion_tokens_details":7}`)})
		}, &recWriter{}, "map[]"},
		{"escaped and repeated keys", func(w agent.Writer, m string) error {
			return w.Complete(map[string]any{"model": m, "usage": json.RawMessage(`{"prompt\u005ftokens":4,"completion_tokens":1,` +
				`"completion_tokens":2,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning\u005ftokens":1}}`)})
		}, &recWriter{}, "map[m completion:2 m prompt:4 m reasoning:1]"},
		{"usage not an object", func(w agent.Writer, m string) error {
			return w.Complete(map[string]any{"model": m, "usage": json.RawMessage(`[1]`)})
		}, &recWriter{}, "map[]"},
		{"model not UTF-8", func(w agent.Writer, _ string) error {
			return w.Complete(map[string]any{"model": "a\xffb", "usage": usage})
		}, &recWriter{}, "map[a\uFFFDb completion:3 a\uFFFDb prompt:5]"},
		{"no model", func(w agent.Writer, _ string) error {
			return w.Complete(map[string]any{"usage": usage})
		}, &recWriter{}, "map[unknown completion:3 unknown prompt:5]"},
	} {
		reg := prometheus.NewRegistry()
		h, _ := newTestHandler(t, &usageUp{final: c.final}, WithMetrics(reg))
		if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "m"}, c.w); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := fmt.Sprint(tokenSeries(t, reg)); got != c.want {
			t.Errorf("%s: counted %s, want %s", c.name, got, c.want)
		}
	}
}

// TestTokensRetriedOnce: a request whose first call failed before any
// frame counts the usage of the call that answered, once.
func TestTokensRetriedOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := 0
	up := &usageUp{final: func(w agent.Writer, m string) error {
		if calls++; calls == 1 {
			return Errorf(CodeUnavailable, true, "503")
		}
		return w.Complete(map[string]any{"model": m, "usage": json.RawMessage(`{"prompt_tokens":4,"completion_tokens":1}`)})
	}}
	h, _ := newTestHandler(t, up, WithMetrics(reg))
	if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "m"}, &recWriter{}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("%d calls, want 2", calls)
	}
	if got := fmt.Sprint(tokenSeries(t, reg)); got != "map[m completion:1 m prompt:4]" {
		t.Errorf("counted %s", got)
	}
}

// TestTokensModelCap: a pool's token series name at most maxModels models
// (the first ones seen); the usage of any other is counted as model
// "other", however many there are; a model seen before the cap keeps its
// series.
func TestTokensModelCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, _ := newTestHandler(t, &usageUp{final: func(w agent.Writer, m string) error {
		return w.Complete(map[string]any{"model": m, "usage": json.RawMessage(`{"prompt_tokens":1,"completion_tokens":1}`)})
	}}, WithMetrics(reg))
	serve := func(model string) {
		if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: model}, &recWriter{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxModels + 10 {
		serve(fmt.Sprintf("model-%02d", i))
	}
	serve("model-00")
	series := tokenSeries(t, reg)
	models := map[string]bool{}
	for k := range series {
		models[strings.Fields(k)[0]] = true
	}
	if len(models) != maxModels+1 || !models["other"] || !models["model-00"] || !models[fmt.Sprintf("model-%02d", maxModels-1)] {
		t.Errorf("%d models labelled (%v), want the first %d and other", len(models), models, maxModels)
	}
	if series["other prompt"] != 10 || series["model-00 prompt"] != 2 {
		t.Errorf("other %v, model-00 %v; want 10 and 2", series["other prompt"], series["model-00 prompt"])
	}
	// Another pool has its own models.
	q, err := New("q", &usageUp{final: func(w agent.Writer, m string) error {
		return w.Complete(map[string]any{"model": m, "usage": json.RawMessage(`{"prompt_tokens":1}`)})
	}}, WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Serve(context.Background(), &e2a.Envelope{RequestID: "model-99"}, &recWriter{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(h.m.tokens.WithLabelValues("q", "test http://upstream", "model-99", "prompt")); got != 1 {
		t.Errorf("pool q's own model counted %v, want 1", got)
	}
}

package openai_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// tokensCounted is e2a_bridge_tokens_total of the pool p in reg, by
// "model kind" (the upstream label checked: the bridge's Name).
func tokensCounted(t *testing.T, reg *prometheus.Registry, upstream string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range testkit.Series(t, reg, "e2a_bridge_tokens_total") {
		if m.Labels["pool"] != pool || m.Labels["upstream"] != upstream {
			t.Errorf("tokens counted under pool %q upstream %q, want %q %q", m.Labels["pool"], m.Labels["upstream"], pool, upstream)
		}
		out[m.Labels["model"]+" "+m.Labels["kind"]] = m.Value
	}
	return out
}

// TestTokenMetrics: the usage the model server reports in its stream
// (stream_options.include_usage) is counted once per request, through the
// real pipeline, as e2a_bridge_tokens_total by the server's model and
// kind: prompt and completion, cached_prompt and reasoning when the server
// reports them (0 included); a stream without usage counts nothing; a
// request retried before its first frame counts its answer once; a
// request that fails counts nothing, even when the server sent its usage
// before failing (only a final result's usage is counted); a stream that
// names no model counts under the model asked for.
func TestTokenMetrics(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	upstream := "openai " + srv.URL // Upstream.Name: the scheme and host

	var refused atomic.Bool
	srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
		switch body.lastUser() {
		case "fixture:usage":
			if refused.CompareAndSwap(false, true) { // the first call: 503, retried
				http.Error(w, `{"error":{"message":"busy","type":"server_error"}}`, http.StatusServiceUnavailable)
				return true
			}
		case "usage then failure":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			for _, ev := range []string{
				`data: {"id":"c1","object":"chat.completion.chunk","model":"failing-model","choices":[{"index":0,"delta":{"content":"Once"},"finish_reason":null}]}`,
				`data: {"id":"c1","object":"chat.completion.chunk","model":"failing-model","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`,
				"event: error\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"invalid_request_error\"}}",
			} {
				_, _ = fmt.Fprintf(w, "%s\n\n", ev)
			}
			return true
		}
		return false
	})

	for id, text := range map[string]string{"t-usage": "fixture:usage", "t-reasoning": "fixture:reasoning",
		"t-text": "fixture:text", "t-error": "fixture:error", "t-failed": "usage then failure", "t-nomodel": "fixture:usage_nomodel"} {
		fs := ask(t, p, "", id, text, nil)
		final := fs[len(fs)-1]
		if (final.ResponseKind == e2a.KindError) != (id == "t-error" || id == "t-failed") {
			t.Fatalf("%s ended %s", id, final.ResponseKind)
		}
		// A server that names no model: the result names the one asked for.
		if id == "t-nomodel" && !strings.Contains(string(final.Body), `"model":"test-model"`) {
			t.Errorf("%s: final result %s, want the model asked for", id, final.Body)
		}
	}
	if len(srv.recordedCalls()) != 7 {
		t.Fatalf("%d calls to the server, want 7 (fixture:usage retried once)", len(srv.recordedCalls()))
	}
	want := map[string]float64{
		// usage.sse: 19 + 4, details reported as 0.
		"gpt-4.1-mini-2025-04-14 prompt": 19, "gpt-4.1-mini-2025-04-14 completion": 4,
		"gpt-4.1-mini-2025-04-14 cached_prompt": 0, "gpt-4.1-mini-2025-04-14 reasoning": 0,
		// reasoning.sse: no prompt_tokens_details.
		"deepseek-reasoner prompt": 12, "deepseek-reasoner completion": 18, "deepseek-reasoner reasoning": 11,
		"test-model prompt": 3, "test-model completion": 1,
	}
	got := tokensCounted(t, p.Registry, upstream)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tokens counted %v\nwant %v", got, want)
	}

	// The same answer again adds to the same series.
	ask(t, p, "", "t-usage-2", "fixture:usage", nil)
	if got := tokensCounted(t, p.Registry, upstream); got["gpt-4.1-mini-2025-04-14 prompt"] != 38 ||
		got["gpt-4.1-mini-2025-04-14 completion"] != 8 {
		t.Errorf("after a second request: %v, want prompt 38, completion 8", got)
	}
}

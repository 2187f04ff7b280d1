package bridge

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCountTokensAllocs: the usage of a final result is read without
// decoding it into maps (it was 48 allocations per bridged request, the
// largest of the bridge's own): a result as the OpenAI bridge writes it
// costs none.
func TestCountTokensAllocs(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var models modelLabels
	result := map[string]any{"content": "hi", "model": "gpt-x", "usage": json.RawMessage(`{"prompt_tokens":12,"completion_tokens":7,` +
		`"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}`)}
	m.countTokens(&models, "p", "up", result, nil) // the series made
	if n := testing.AllocsPerRun(100, func() { m.countTokens(&models, "p", "up", result, nil) }); n > 0 {
		t.Errorf("countTokens: %v allocations, want none", n)
	}
}

package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestRootCardDefaultPoolInputModes: the pipeline's own card describes
// its default pool, whose door checks a file part against that pool's
// input modes; with a default pool that declares image/png, the root card
// (both generations' paths) lists them as defaultInputModes, as the
// pool's own card does, instead of the pipeline's text-only defaults.
func TestRootCardDefaultPoolInputModes(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("vision")))
	modes := []string{"text/plain", "image/png"}
	publishPoolInfo(t, p.NC, bridge.PoolInfo{Pool: "vision", Streaming: true, InputModes: modes})
	for _, path := range []string{"/.well-known/agent-card.json", "/a2a/v1/.well-known/agent-card.json",
		"/pools/vision/.well-known/agent-card.json"} {
		var card struct {
			DefaultInputModes []string `json:"defaultInputModes"`
		}
		if err := json.Unmarshal(cardBody(t, http.MethodGet, p.URL+path, "", http.StatusOK), &card); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(card.DefaultInputModes, modes) {
			t.Errorf("%s: defaultInputModes %v, want the default pool's %v", path, card.DefaultInputModes, modes)
		}
	}
}

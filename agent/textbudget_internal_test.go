package agent

import (
	"math"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestTextBudgetHugeBound: a coalescing bound of math.MaxInt
// (WithCoalesce, "no bound") is capped to what one frame holds, as any
// bound over it is. textBudget multiplied the bound by maxEscape, which
// overflowed and said any text fits: the deltas gathered into one chunk
// over max_payload, refused after their Chunk calls returned nil, and
// the text was lost (frame_too_large).
func TestTextBudgetHugeBound(t *testing.T) {
	_, nc := natstest.RunServer(t)
	w := &worker{pool: "p", cfg: defaultConfig(), js: natstest.JetStream(t, nc)}
	wr := newWriter(w, &e2a.Envelope{RequestID: "r"}, "r", "s", nil, -1)
	limit := int(nc.MaxPayload())
	for _, n := range []int{math.MaxInt, math.MaxInt / maxEscape, limit} {
		budget, capped := wr.textBudget(e2a.DeltaText, n)
		if !capped || budget <= 0 || budget >= limit {
			t.Errorf("textBudget(%d) = %d, capped %v; want a budget in (0, %d), capped", n, budget, capped, limit)
		}
	}
	if _, capped := wr.textBudget(e2a.DeltaText, 1024); capped {
		t.Error("textBudget(1024) capped: 1 KiB of any text fits a frame")
	}
}

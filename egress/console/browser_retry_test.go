package console_test

import (
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestBrowserRetryableStreamEndRetried: a stream that egress ends with a
// retryable error (timeout: no frame within its wait limit, as for a
// request of a pool whose worker has not started; unavailable) is asked
// for again, so the page shows the frames that come later. The page took
// every error event as the end: it said "stream ended: timeout" and
// showed nothing more of a request that was answered a minute later.
func TestBrowserRetryableStreamEndRetried(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true,
		egress: []egress.Option{egress.WithWaitLimits(300*time.Millisecond, 300*time.Millisecond)}})
	const id = "answered-after-the-wait"
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "params": map[string]any{}})

	b.openRequest(p.url, id)
	b.waitJS("the stream ended by the wait limit", `document.getElementById('stream-state').textContent.includes('timeout')`, 15*time.Second)
	b.shot("timed-out")
	natstest.PublishBurst(t, p.nc, id, 0, 0,
		frameOf(t, id, 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "late answer"}),
		frameOf(t, id, 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}))
	b.waitJS("the frames that came after", `document.querySelector('#frames li.frame[data-final=true]') !== null &&
		document.getElementById('stream-state').dataset.state === 'complete' &&
		document.getElementById('transcript').textContent.includes('late answer')`, 20*time.Second)
	b.shot("answered")
	if st := eval[string](b, `(detail.es ? 'open' : 'closed') + '|' + (detail.retryTimer ? 'retrying' : 'stopped')`); st != "closed|stopped" {
		t.Errorf("after the final frame the page's stream is %s, want closed|stopped", st)
	}
}

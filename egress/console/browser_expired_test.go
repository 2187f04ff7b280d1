package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestBrowserExpiredRequest: a request whose frames are no longer held
// (listed "expired": evicted from E2A_RESPONSES, or aged out), whose
// stream egress answers 410 frames_expired, says so, with the way to its
// audit copy (e2a replay), and the page stops asking for it. It said
// "not available (retrying)" and "no frame yet", and asked again every
// 3 s for as long as it was open: only a 404 ended the tries.
func TestBrowserExpiredRequest(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{})
	id := p.submit(t, `{"params":{"text":"soon gone","frames":2}}`)
	waitFinal(t, p, id)
	natstest.Purge(t, natstest.JetStream(t, p.nc), streams.ResponsesStream) // evicted
	// The check reads the pool's ack floor, cached a few seconds
	// (TestAnsweredRequestWithEvictedFramesIsExpired).
	waitFor(t, 20*time.Second, "the request shown expired", func() bool {
		e, err := p.con.Lookup(context.Background(), id)
		return err == nil && e != nil && e.Status == console.StatusExpired
	})

	b.openRequest(p.url, id)
	b.waitJS("the stream's end said", `document.getElementById('stream-state').textContent.includes('frames_expired')`, 15*time.Second)
	b.shot("expired")
	state := eval[string](b, streamStateJS)
	if !strings.Contains(state, "e2a replay") || strings.Contains(state, "retrying") {
		t.Errorf("stream state %q; want the frames expired, read with e2a replay, no retry", state)
	}
	if st := eval[string](b, `(detail.es ? 'open' : 'closed') + '|' + (detail.retryTimer ? 'retrying' : 'stopped')`); st != "closed|stopped" {
		t.Errorf("after the 410 the page's stream is %s, want closed|stopped", st)
	}
	if tr := eval[string](b, `document.getElementById('transcript').textContent`); strings.Contains(tr, "no frame yet") {
		t.Errorf("transcript %q: the request's frames are gone, not yet to come", tr)
	}
}

package console_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
)

// TestBrowserLongStreamStateKeepsBadge: a long stream state (the error a
// stream ended with, which names the request: a timeout, frames that
// expired) leaves the detail's status badge on one line and within the
// pane. It took the head's width, the badge squeezed to one letter a line
// ("e x p i r e d" down the page) beside it.
func TestBrowserLongStreamStateKeepsBadge(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true,
		egress: []egress.Option{egress.WithWaitLimits(300*time.Millisecond, 300*time.Millisecond)}})
	id := "waits-" + strings.Repeat("long-id-", 25)
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "params": map[string]any{}})

	b.openRequest(p.url, id)
	b.waitJS("the stream's end said", `document.getElementById('stream-state').textContent.includes('timeout')`, 15*time.Second)
	b.waitJS("the status badge", `document.querySelector('#d-status .badge') !== null`, 10*time.Second)
	b.shot("long-state")
	got := eval[string](b, `(() => { const s = document.querySelector('#d-status .badge').getBoundingClientRect();
		const h = document.querySelector('.detail-head'); const st = document.getElementById('stream-state');
		return Math.round(s.height) + '|' + (h.scrollWidth > h.clientWidth + 1 ? 'overflows' : 'fits') + '|' + (st.scrollWidth > st.clientWidth + 1 ? 'overflows' : 'fits'); })()`)
	parts := strings.Split(got, "|")
	if h, err := strconv.Atoi(parts[0]); err != nil || h >= 30 || len(parts) != 3 || parts[1] != "fits" || parts[2] != "fits" {
		t.Errorf("status badge height px | head | stream state: %s; want one line (< 30 px), the head and its state within the pane", got)
	}
}

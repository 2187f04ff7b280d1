package console_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
)

// TestBrowserDetailRetried: a detail call answered 503 (retryable: here
// the audit history the detail is read from cannot be read for a while)
// is asked for again, as the stream is: the page showed the error and
// never the summary, though the stream under it came.
func TestBrowserDetailRetried(t *testing.T) {
	b := newBrowser(t)
	h := &memHistory{reqs: map[string]egress.HistoricRequest{}}
	p := startPipeline(t, pipelineOptions{egress: []egress.Option{egress.WithHistory(h)}})
	id := p.submit(t, `{"params":{"text":"read from the history","frames":2}}`)
	waitFinal(t, p, id)
	h.keep(t, p, id)
	// Its copy without the final frame: the stream shows the frames
	// before it and waits on, so no final frame reloads the summary
	// (pollFinalInfo); only a retry of the detail shows it.
	h.mu.Lock()
	r := h.reqs[id]
	r.Frames = r.Frames[:len(r.Frames)-1]
	h.reqs[id] = r
	h.mu.Unlock()
	h.fail.Store(true)

	b.openRequest(p.url, id)
	b.waitJS("the detail's 503", `document.getElementById('d-summary').textContent.includes('could not be read')`, 15*time.Second)
	b.shot("detail-unavailable")
	h.fail.Store(false)
	b.waitJS("the summary", `document.getElementById('envelope').textContent.includes(`+strconv.Quote(`"request_id": "`+id+`"`)+`) &&
		document.getElementById('replay-cmd').textContent.includes(`+strconv.Quote(id)+`) &&
		!document.getElementById('d-summary').textContent.includes('retrying')`, 15*time.Second)
	b.waitJS("the frames before the final", `document.querySelectorAll('#frames li.frame').length > 0`, 15*time.Second)
	b.shot("detail-retried")
}

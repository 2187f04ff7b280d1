package console_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserDotIDs: a request whose id is the dot segment "." or ".."
// opens in the page like any other: its summary, replay command and
// frames. The browser resolves a path segment "%2E%2E" (WHATWG URL) as
// "..", so the page asked /console/api/ for the request's detail and
// /console/api/stream for its frames, both 404: the page said "no such
// request" of a request its list showed (TestDotIDs, with Go's client,
// which keeps the path as sent, did not see it).
func TestBrowserDotIDs(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{})
	for _, id := range []string{".", ".."} {
		p.submit(t, `{"request_id":`+strconv.Quote(id)+`,"params":{"text":"dots","frames":1}}`)
		waitFinal(t, p, id)
	}
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	for _, id := range []string{".", ".."} {
		q := strconv.Quote(id)
		b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/' + encodeURIComponent(` + q + `)`))
		b.waitJS("request "+q+" open", `document.getElementById('d-id').textContent === `+q, 10*time.Second)
		b.waitJS("the final frame of "+q, `document.querySelector('#frames li.frame[data-final=true]') !== null &&
			document.getElementById('stream-state').dataset.state === 'complete'`, 15*time.Second)
		b.waitJS("the summary of "+q, `document.getElementById('replay-cmd').textContent === 'e2a replay --request '+`+q+` &&
			document.getElementById('envelope').textContent.includes('"request_id": '+JSON.stringify(`+q+`))`, 10*time.Second)
		b.shot("dot-id-" + strconv.Itoa(len(id)))
	}
}

package console_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserContextFilter: the filter form searches by context id, as
// the API does (context=): the form had fields for a request id, a task,
// a session and a user, none for a context.
func TestBrowserContextFilter(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{})
	in := p.submit(t, `{"context_id":"ctx-wanted","params":{"text":"in the context","frames":1}}`)
	out := p.submit(t, `{"context_id":"ctx-other","params":{"text":"in another","frames":1}}`)
	waitFinal(t, p, in, out)
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#filters`)))
	b.waitJS("both rows", `document.querySelectorAll('#requests tbody tr.row').length === 2`, 10*time.Second)
	b.run(chromedp.SendKeys(chromedp.CSS(`#filters input[name=context]`), "ctx-wanted"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	b.waitJS("the list of the context", fmt.Sprintf(`(() => {
		const ids = Array.from(document.querySelectorAll('#requests tbody tr.row')).map((r) => r.dataset.id);
		return ids.length === 1 && ids[0] === %q;
	})()`, in), 10*time.Second)
	b.run(chromedp.SetValue(chromedp.CSS(`#filters input[name=context]`), "ctx-none"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	b.waitJS("no row, the context named", `document.querySelectorAll('#requests tbody tr.row').length === 0 &&
		document.getElementById('empty').textContent.includes('context')`, 10*time.Second)
}

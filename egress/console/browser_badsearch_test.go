package console_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestBrowserRefusedSearchShowsNoRows: a search the API refuses (a custom
// range whose end is before its start: 400) says why and lists nothing;
// the rows of the previous search stayed under the new filters, as if
// they matched them, with "list unavailable" beside them.
func TestBrowserRefusedSearchShowsNoRows(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	const id = "listed-before-the-search"
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "params": map[string]any{}})
	natstest.PublishBurst(t, p.nc, id, 0, 0, natstest.Frame(id, 0, true))
	waitFinal(t, p, id)

	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	b.waitJS("the request listed", `document.querySelectorAll('#requests tbody tr.row').length === 1`, 10*time.Second)
	b.run(chromedp.SetValue(chromedp.CSS(`#filters select[name=range]`), "custom"),
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.getElementById('filters');
			f.elements.since.value = '2030-01-02T10:00:00'; f.elements.until.value = '2030-01-01T10:00:00'; })()`),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	b.waitJS("the refusal said", `document.getElementById('page-info').textContent.includes('until before since')`, 10*time.Second)
	b.shot("refused")
	if n := eval[float64](b, `document.querySelectorAll('#requests tbody tr.row').length`); n != 0 {
		t.Errorf("after a refused search the list shows %v rows of the previous one", n)
	}
	if older := eval[bool](b, `document.getElementById('older').disabled`); !older {
		t.Error("after a refused search the Older button is enabled")
	}
}

package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/egress/console"
)

// TestBrowserDotTaskPush: the push panel of a request of the task "." or
// ".." shows the task's configs like any other's. The page asked
// /console/api/tasks/%2E%2E/push, which the browser resolves as a dot
// segment (/console/api/push): 404, and the panel stayed empty. The task
// now goes in the query, as a request id "." or ".." does.
func TestBrowserDotTaskPush(t *testing.T) {
	b := newBrowser(t)
	view := func(_ context.Context, _, task string) ([]console.PushDelivery, error) {
		return []console.PushDelivery{{ConfigID: "cfg-" + strconv.Itoa(len(task)), Host: "hooks.example"}}, nil
	}
	p := startPipeline(t, pipelineOptions{console: []console.Option{console.WithPushView(view)}})
	ids := map[string]string{}
	for _, task := range []string{".", ".."} {
		ids[task] = p.submit(t, `{"task_id":`+strconv.Quote(task)+`,"params":{"text":"dots","frames":1}}`)
	}
	waitFinal(t, p, ids["."], ids[".."])
	if resp, body := p.do(t, "GET", "/console/api/task/push", ""); resp.StatusCode != 400 || !strings.Contains(string(body), "missing task id") {
		t.Errorf("GET /console/api/task/push without ?id=: %d %s; want 400 saying the id is missing", resp.StatusCode, body)
	}
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	for _, task := range []string{".", ".."} {
		b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/' + encodeURIComponent(` + strconv.Quote(ids[task]) + `)`))
		b.waitJS("the push panel of task "+strconv.Quote(task), `(() => {
			const tr = document.querySelector('#d-push tr[data-config="cfg-`+strconv.Itoa(len(task))+`"]');
			return !!tr && !document.getElementById('d-push').hidden && tr.cells[1].textContent === 'hooks.example';
		})()`, 15*time.Second)
	}
}

package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/egress/console"
)

// TestBrowserPush: in headless Chromium, alice opens her request of task
// t-alice and the detail shows her config's delivery state (its host and
// the last update handled once the push stage delivered the turn), and
// nowhere on the page the webhook's path or query, the token or the
// credentials.
//
// The stage moves the config's cursor after the webhook answered, so the
// test waits for the cursor on the last update (as push's own tests do)
// before it opens the page. The page reloads the panel while the index
// catches up with the final state (pollFinalInfo), emptying it during
// each fetch, so the row is checked with its content in one condition.
func TestBrowserPush(t *testing.T) {
	b := newBrowser(t)
	p, r := startPushConsole(t)
	id := p.submit(t, `{"task_id":"t-alice","params":{"text":"push in the console","frames":2}}`, "X-Api-Key", keyAlice)
	waitFinal(t, p, id)
	ds := r.Await(t, 20*time.Second, "/secret-path", "TASK_STATE_COMPLETED")
	last := ds[len(ds)-1].EventID
	host := strings.TrimPrefix(r.URL, "http://")
	waitFor(t, 20*time.Second, "the push stage's cursor on the last update "+last, func() bool {
		resp, body := p.do(t, "GET", "/console/api/tasks/t-alice/push", "", "X-Api-Key", keyAlice)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("alice's push view: %d %s", resp.StatusCode, body)
		}
		tp := decode[console.TaskPush](t, body)
		return len(tp.Configs) == 1 && tp.Configs[0].LastEvent == last
	})

	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS("#login")))
	b.run(chromedp.SetValue(chromedp.CSS(`#login select[name=scheme]`), "apiKey"))
	b.run(chromedp.SendKeys(chromedp.CSS(`#login input[name=secret]`), keyAlice))
	b.run(chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	b.waitJS("the list", `document.querySelectorAll('#requests tbody tr.row').length >= 1`, 10*time.Second)
	// Alice has no audit or admin role: the deployment's counters are not
	// hers (GET /console/api/stats is 403), and the page shows none.
	if !eval[bool](b, `document.getElementById('stats').hidden && getComputedStyle(document.getElementById('stats')).display === 'none'`) {
		t.Error("the counters are shown to alice, a principal without the audit or admin role")
	}
	b.run(chromedp.Navigate(p.url + "/console#/requests/" + id))
	// One evaluation: the row with its cells (config, host, last update,
	// state), read at the same instant it is found.
	b.waitJS("the push row with host, last update and ok", fmt.Sprintf(`(() => {
		const tr = document.querySelector('#d-push tr[data-config="cfg-1"]');
		if (!tr) return false;
		const c = Array.from(tr.cells, (td) => td.textContent);
		return c[1] === %q && c[2] === %q && c[3] === 'ok';
	})()`, host, last), 15*time.Second)
	b.shot("push-panel")
	// The summary reloads (as it does while the index catches up after the
	// final frame): the panel keeps its row through every reload, never
	// emptied or hidden in between (it flickered so before).
	eval[bool](b, `(() => {
		const box = document.getElementById('d-push');
		window.pushEmptied = false;
		window.pushReloads = 0;
		new MutationObserver(() => {
			if (box.hidden || !box.querySelector('tr[data-config="cfg-1"]')) window.pushEmptied = true;
		}).observe(box, {childList: true, subtree: true, attributes: true});
		(async () => { for (let i = 0; i < 3; i++) { await loadInfo(detail.id); window.pushReloads++; } })();
		return true;
	})()`)
	b.waitJS("three reloads of the summary", `window.pushReloads === 3`, 10*time.Second)
	if eval[bool](b, `window.pushEmptied`) {
		t.Error("the push panel was emptied or hidden while the summary reloaded")
	}
	page := eval[string](b, `document.documentElement.outerHTML`)
	for _, secret := range []string{"secret-path", "secret-query", "tok-secret", "cred-secret"} {
		if strings.Contains(page, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
}

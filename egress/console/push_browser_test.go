package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPush: in headless Chromium, alice opens her request of task
// t-alice and the detail shows her config's delivery state (its host and
// the last update handled once the push stage delivered the turn), and
// nowhere on the page the webhook's path or query, the token or the
// credentials.
func TestBrowserPush(t *testing.T) {
	b := newBrowser(t)
	p, r := startPushConsole(t)
	id := p.submit(t, `{"task_id":"t-alice","params":{"text":"push in the console","frames":2}}`, "X-Api-Key", keyAlice)
	waitFinal(t, p, id)
	ds := r.Await(t, 20*time.Second, "/secret-path", "TASK_STATE_COMPLETED")
	last := ds[len(ds)-1].EventID

	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS("#login")))
	b.run(chromedp.SetValue(chromedp.CSS(`#login select[name=scheme]`), "apiKey"))
	b.run(chromedp.SendKeys(chromedp.CSS(`#login input[name=secret]`), keyAlice))
	b.run(chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	b.waitJS("the list", `document.querySelectorAll('#requests tbody tr.row').length >= 1`, 10*time.Second)
	b.run(chromedp.Navigate(p.url + "/console#/requests/" + id))
	b.waitJS("the push panel", `document.querySelector('#d-push tr[data-config="cfg-1"]') !== null`, 15*time.Second)
	b.shot("push-panel")
	row := eval[string](b, `document.querySelector('#d-push tr[data-config="cfg-1"]').textContent`)
	host := strings.TrimPrefix(r.URL, "http://")
	if !strings.Contains(row, host) || !strings.Contains(row, last) || !strings.Contains(row, "ok") {
		t.Errorf("push row %q: want host %s, last update %s, ok", row, host, last)
	}
	page := eval[string](b, `document.documentElement.outerHTML`)
	for _, secret := range []string{"secret-path", "secret-query", "tok-secret", "cred-secret"} {
		if strings.Contains(page, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
}

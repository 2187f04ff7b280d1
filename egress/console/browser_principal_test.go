package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// signIn signs in on the console's sign-in page with an API key and waits
// for the console.
func (b *browser) signIn(key string) {
	b.t.Helper()
	b.run(chromedp.WaitVisible(chromedp.CSS("#login")))
	b.run(chromedp.SetValue(chromedp.CSS(`#login select[name=scheme]`), "apiKey"))
	b.run(chromedp.SendKeys(chromedp.CSS(`#login input[name=secret]`), key))
	b.run(chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	b.run(chromedp.WaitVisible(chromedp.CSS(`#requests`)))
}

// TestBrowserFramesStayWithTheirPrincipal: the page keeps the frames it
// showed in the tab's sessionStorage, so that a reload resumes after them;
// they were kept under the request id alone, and shown before the server
// was asked anything. In a tab where bob had opened his request, alice
// signing in (bob's sign-in expired, the tab left on bob's request)
// was shown bob's transcript from the tab's storage, though the console
// answers her 404 for it; and signing out left every transcript in the
// tab. The frames are kept per principal, and signing out forgets them.
func TestBrowserFramesStayWithTheirPrincipal(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	const canary = "bob-private-answer-8d31"
	id := "req-bob-stored-frames"
	publishEnvelope(t, p, id, map[string]any{"user_id": "bob", "params": map[string]any{"text": "bob's question"}})
	natstest.PublishBurst(t, p.nc, id, 0, 0,
		frameOf(t, id, 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: canary}),
		frameOf(t, id, 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}))
	waitFinal(t, p, id)
	storedFramesJS := `Object.keys(sessionStorage).filter((k) => sessionStorage.getItem(k).includes(` + strconv.Quote(canary) + `)).length`

	// Bob opens his request: its frames are kept by the tab.
	b.run(chromedp.Navigate(p.url + "/console"))
	b.signIn(keyBob)
	b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/` + id + `'`))
	b.waitJS("bob's answer", `document.getElementById('transcript').textContent.includes(`+strconv.Quote(canary)+`)`, 15*time.Second)
	b.waitJS("the frames kept by the tab", storedFramesJS+` === 1`, 10*time.Second)

	// Bob's sign-in expires (the cookie is gone) with the tab on his
	// request; alice signs in in that tab.
	b.run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))
	b.run(chromedp.Reload())
	b.signIn(keyAlice)
	b.waitJS("the detail's answer for alice", `document.querySelector('#d-summary .error') !== null`, 15*time.Second)
	b.shot("alice-on-bobs-request")
	if shown := eval[string](b, `document.getElementById('detail').textContent`); strings.Contains(shown, canary) {
		t.Errorf("alice, signed in where bob's request was open, is shown bob's frames from the tab's storage: %.300s", shown)
	}

	// Signing out forgets every transcript the tab kept.
	b.run(chromedp.Click(chromedp.CSS(`#who button`)))
	b.run(chromedp.WaitVisible(chromedp.CSS("#login")))
	if n := eval[float64](b, storedFramesJS); n != 0 {
		t.Errorf("after signing out, the tab still keeps bob's frames (%v items)", n)
	}
}

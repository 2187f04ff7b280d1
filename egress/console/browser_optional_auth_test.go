package console_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestBrowserOptionalAuthSignIn: with optional auth (the scheme none
// beside API keys: ingress/AUTH.md), a visitor without a credential is
// served the console as the anonymous principal, and is offered the
// sign-in form; signing in there (the audit role's key) shows what that
// principal sees, and signing out is the anonymous visitor again, offered
// the form. The page was served to the visitor with no way to sign in:
// the form was shown only to a request the credential check refused,
// which none is here, and "sign out" led back to the anonymous page.
func TestBrowserOptionalAuthSignIn(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{auth: true, optional: true, noAgent: true})
	const id = "req-alice-optional-auth"
	publishEnvelope(t, p, id, map[string]any{"user_id": "alice", "params": map[string]any{"text": "alice's"}})
	natstest.PublishBurst(t, p.nc, id, 0, 0, frameOf(t, id, 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}))
	waitFinal(t, p, id)
	const signInLink = `#who a[href="/console/login"]`
	rowJS := `document.querySelector('tr.row[data-id=` + strconv.Quote(id) + `]') !== null`

	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	b.waitJS("the anonymous visitor offered the sign-in", `document.querySelector('`+signInLink+`') !== null &&
		document.getElementById('who').textContent.includes('anonymous')`, 10*time.Second)
	b.shot("anonymous")
	if eval[bool](b, rowJS) {
		t.Fatal("the anonymous visitor is listed alice's request")
	}

	b.run(chromedp.Click(chromedp.CSS(signInLink)))
	b.signIn(keyOps)
	b.waitJS("signed in as ops", `document.getElementById('who').textContent.includes('signed in as ops')`, 10*time.Second)
	b.waitJS("alice's request listed to the audit role", rowJS, 10*time.Second)
	b.shot("signed-in")

	b.run(chromedp.Click(chromedp.CSS(`#who button`)))
	b.waitJS("signed out: the anonymous visitor again, offered the sign-in", `document.querySelector('`+signInLink+`') !== null &&
		document.getElementById('who').textContent.includes('anonymous')`, 10*time.Second)
}

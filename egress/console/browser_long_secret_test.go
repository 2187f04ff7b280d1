package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestBrowserLongSecretSignIn: the sign-in keeps the credential in a
// cookie, which a browser keeps only up to 4,096 bytes of name and value.
// A secret the console took (up to 4,096 bytes) whose cookie was longer
// was answered 200, the browser dropped the cookie, and the page came
// back to the sign-in form without a word. The longest secret a cookie
// holds signs in; a longer one is refused, saying why.
func TestBrowserLongSecretSignIn(t *testing.T) {
	fits := "ak_fits_" + strings.Repeat("f", 3062-8)
	over := "ak_over_" + strings.Repeat("o", 3063-8)
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true,
		keys: []ingress.Credential{{Principal: "carol", Secret: fits}, {Principal: "dave", Secret: over}}})
	signIn := func(b *browser, key string) {
		b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS("#login")))
		b.run(chromedp.SetValue(chromedp.CSS(`#login select[name=scheme]`), "apiKey"),
			chromedp.SetValue(chromedp.CSS(`#login input[name=secret]`), key),
			chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	}
	b := newBrowser(t)
	signIn(b, fits)
	b.waitJS("carol signed in", `!!document.getElementById('who') && document.getElementById('who').textContent.includes('carol')`, 15*time.Second)

	b = newBrowser(t)
	signIn(b, over)
	b.waitJS("dave's sign-in refused, saying why", `(() => {
		const e = document.getElementById('login-error');
		return !!e && !e.hidden && e.textContent.includes('cookie');
	})()`, 15*time.Second)
	b.shot("long-secret-refused")
}

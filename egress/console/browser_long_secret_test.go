package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// consoleCookies are the console's sign-in cookies the browser holds for
// the console at base.
func (b *browser) consoleCookies(base string) []*network.Cookie {
	b.t.Helper()
	var res network.GetCookiesResult
	b.run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) (err error) {
		res, err = cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/api/session"}})
		return err
	}))
	var out []*network.Cookie
	for _, ck := range res.Cookies {
		if strings.HasPrefix(ck.Name, "e2a_console") {
			out = append(out, ck)
		}
	}
	return out
}

// signInWith fills the sign-in form with a secret of scheme and sends it.
func (b *browser) signInWith(scheme, secret string) {
	b.t.Helper()
	b.run(chromedp.WaitVisible(chromedp.CSS("#login")))
	b.run(chromedp.SetValue(chromedp.CSS(`#login select[name=scheme]`), scheme),
		chromedp.SetValue(chromedp.CSS(`#login input[name=secret]`), secret),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
}

// TestBrowserLongSecretSignIn: the sign-in keeps the credential in
// cookies, which a browser keeps only up to 4,096 bytes of name and value
// each. A secret the console took whose cookie was longer was answered
// 200, the browser dropped the cookie, and the page came back to the
// sign-in form without a word. The longest secret the cookies hold (four
// of them, a secret of characters a cookie cannot carry as they are, kept
// in base64url) signs in; a longer one is refused, saying why.
func TestBrowserLongSecretSignIn(t *testing.T) {
	const most = 12243
	fits := "ak_fits;" + strings.Repeat("f", most-8)
	over := "ak_over;" + strings.Repeat("o", most+1-8)
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true,
		keys: []ingress.Credential{{Principal: "carol", Secret: fits}, {Principal: "dave", Secret: over}}})
	b := newBrowser(t)
	b.run(chromedp.Navigate(p.url + "/console"))
	b.signInWith("apiKey", fits)
	b.waitJS("carol signed in", `!!document.getElementById('who') && document.getElementById('who').textContent.includes('carol')`, 15*time.Second)
	if n := len(b.consoleCookies(p.url)); n != 4 {
		t.Errorf("the browser holds %d sign-in cookies, want 4", n)
	}

	b = newBrowser(t)
	b.run(chromedp.Navigate(p.url + "/console"))
	b.signInWith("apiKey", over)
	b.waitJS("dave's sign-in refused, saying why", `(() => {
		const e = document.getElementById('login-error');
		return !!e && !e.hidden && e.textContent.includes('cookie');
	})()`, 15*time.Second)
	b.shot("long-secret-refused")
}

// TestBrowserLongBearerSignIn: a person signs in with a bearer token of 6
// KB (an OIDC token with group claims), reads the console (the list
// shows their request, its detail opens), and signs out. The sign-in
// kept the credential in one cookie and refused a secret over 3,062
// bytes: such a person could not sign in at all. The browser holds the
// credential in two cookies, HttpOnly, SameSite=Strict, scoped to
// /console, and signing out removes both.
func TestBrowserLongBearerSignIn(t *testing.T) {
	token := fakeJWT(6 << 10)
	p := startPipeline(t, pipelineOptions{auth: true, bearers: []ingress.Credential{{Principal: "carol", Secret: token}}})
	id := p.submit(t, `{"params":{"text":"carol's long-token question","frames":1}}`, "Authorization", "Bearer "+token)
	waitFinal(t, p, id)

	b := newBrowser(t)
	b.run(chromedp.Navigate(p.url + "/console"))
	b.signInWith("bearer", token)
	b.waitJS("carol signed in", `!!document.getElementById('who') && document.getElementById('who').textContent.includes('signed in as carol')`, 15*time.Second)
	b.waitJS("carol's request listed", `document.querySelector('tr.row[data-id="`+id+`"]') !== null`, 15*time.Second)
	b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/` + id + `'`))
	b.waitJS("the request's answer", `document.getElementById('transcript').textContent.includes("carol's long-token question")`, 15*time.Second)
	b.shot("signed-in-long-bearer")
	cks := b.consoleCookies(p.url)
	if len(cks) != 2 {
		t.Errorf("the browser holds %d sign-in cookies, want 2 (e2a_console, e2a_console_1)", len(cks))
	}
	for _, ck := range cks {
		if !ck.HTTPOnly || ck.SameSite != network.CookieSameSiteStrict || ck.Path != "/console" || len(ck.Name)+len(ck.Value) > 4096 {
			t.Errorf("cookie %s: HttpOnly %v, SameSite %s, Path %s, %d bytes", ck.Name, ck.HTTPOnly, ck.SameSite, ck.Path, len(ck.Name)+len(ck.Value))
		}
	}
	if html := eval[string](b, `document.documentElement.outerHTML`); strings.Contains(html, token[len(token)-64:]) {
		t.Fatal("the token is in the page")
	}

	b.run(chromedp.Click(chromedp.CSS(`#who button`)))
	b.run(chromedp.WaitVisible(chromedp.CSS("#login")))
	if cks := b.consoleCookies(p.url); len(cks) != 0 {
		t.Errorf("after signing out the browser holds %d sign-in cookies", len(cks))
	}
	b.run(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#login")))
}

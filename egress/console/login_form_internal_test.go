package console

import (
	"regexp"
	"testing"
)

// TestLoginFormPosts: the sign-in form posts to the login API, so that a
// browser that submits it without login.js (scripts off, the script not
// loaded yet) never puts the secret in the URL. Without a method the form
// was a GET to /console: Chromium with scripts off went to
// /console?scheme=apiKey&secret=<the key>, kept in its history and in any
// proxy's log. The API refuses such a post (no X-E2A-Console header).
func TestLoginFormPosts(t *testing.T) {
	b, err := assetFS.ReadFile("assets/login.html")
	if err != nil {
		t.Fatal(err)
	}
	form := regexp.MustCompile(`<form\b[^>]*\bid="login"[^>]*>`).Find(b)
	if form == nil {
		t.Fatal(`login.html has no <form id="login">`)
	}
	for _, attr := range []string{`method="post"`, `action="/console/api/login"`} {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(attr)).Match(form) {
			t.Errorf("the sign-in form %s lacks %s", form, attr)
		}
	}
}

package console_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserStatusBadgesStyled: every status the list may show (the
// session's statuses) has a badge of its own look: "expired" had no
// style, and showed as a bare badge, the look of no status at all.
func TestBrowserStatusBadgesStyled(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#filters`)))
	b.waitJS("the session", `Array.isArray(session.statuses) && session.statuses.length > 0`, 10*time.Second)
	unstyled := eval[[]string](b, `(() => {
		const look = (cls) => {
			const s = document.createElement('span');
			s.className = cls;
			document.body.append(s);
			const cs = getComputedStyle(s);
			const v = cs.backgroundColor + ' ' + cs.color;
			s.remove();
			return v;
		};
		const bare = look('badge');
		return session.statuses.filter((st) => look('badge ' + st) === bare);
	})()`)
	if len(unstyled) > 0 {
		t.Errorf("statuses whose badge has no style of its own: %v", unstyled)
	}
}

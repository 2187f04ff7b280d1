package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// streamStateJS is the detail's stream state and its text.
const streamStateJS = `(() => { const s = document.getElementById('stream-state'); return s.dataset.state + '|' + s.textContent; })()`

// TestBrowserMissingRequest: a request id in the address that is badly
// encoded (decodeURIComponent threw a URIError: the page stopped before
// it loaded the list), or that the stream answers 404 (unknown, or
// another principal's), is shown "no such request", and the page stops
// asking for its stream (it retried every 3 s forever, "not available
// (retrying)").
func TestBrowserMissingRequest(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	b.run(chromedp.Navigate(p.url + "/console#/requests/%E0%A4%A"))
	b.waitJS("the badly encoded id shown as no such request", `(() => { const s = document.getElementById('stream-state');
		return s.dataset.state === 'missing' && s.textContent.includes('no such request') && !document.getElementById('detail').hidden; })()`, 10*time.Second)
	b.waitJS("the list loaded after it", `document.getElementById('page-info').textContent !== ''`, 10*time.Second)
	b.shot("bad-encoding")
	if id := eval[string](b, `document.getElementById('d-id').textContent`); id != "%E0%A4%A" {
		t.Errorf("the detail names %q, want the id as the address has it", id)
	}

	b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/never-seen'`))
	b.waitJS("the unknown id shown as no such request", `(() => { const s = document.getElementById('stream-state');
		return document.getElementById('d-id').textContent === 'never-seen' && s.dataset.state === 'missing' && s.textContent.includes('no such request'); })()`, 10*time.Second)
	b.shot("unknown-id")
	// Stopped: no stream open, no retry pending.
	if st := eval[string](b, `(detail.es ? 'open' : 'closed') + '|' + (detail.retryTimer ? 'retrying' : 'stopped')`); st != "closed|stopped" {
		t.Errorf("after the 404 the page's stream is %s, want closed|stopped (state %s)", st, eval[string](b, streamStateJS))
	}
}

// TestBrowserEndedRequest: a request that failed after a tool call
// without a result says the call got none (it said "waiting…" forever);
// a 500-character word in the answer and the error wraps in its box (it
// overflowed); Escape closes the detail.
func TestBrowserEndedRequest(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	const id = "ended-without-result"
	long := strings.Repeat("x", 500)
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "params": map[string]any{}})
	natstest.PublishBurst(t, p.nc, id, 0, 0,
		frameOf(t, id, 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaTool,
			Delta: e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call-1", Name: "lookup", Args: map[string]any{"q": "x"}}}),
		frameOf(t, id, 1, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "word " + long}),
		frameOf(t, id, 2, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: "upstream_down", Message: "failed " + long}))
	waitFinal(t, p, id)

	b.openRequest(p.url, id)
	b.waitJS("the final frame", `document.querySelector('#frames li.frame[data-final=true]') !== null`, 15*time.Second)
	b.shot("ended")
	result := eval[string](b, `document.querySelector('.t-tool[data-tool=lookup] .kv:nth-of-type(2)').textContent`)
	if !strings.Contains(result, "no result") || strings.Contains(result, "waiting") {
		t.Errorf("the tool call of a request that ended shows %q, want that it got no result", result)
	}
	// overflowJS lists the elements of sel whose text is wider than their box.
	overflowJS := func(sel string) string {
		return `Array.from(document.querySelectorAll(` + strconv.Quote(sel) + `)).filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.className + ' ' + e.scrollWidth + '>' + e.clientWidth)`
	}
	if wide := eval[[]string](b, overflowJS(`#transcript .answer, #transcript .errorbox`)); len(wide) > 0 {
		t.Errorf("the transcript's long words overflow: %v", wide)
	}
	b.run(chromedp.Click(chromedp.CSS(`.tabs button[data-tab=frames]`)))
	if wide := eval[[]string](b, overflowJS(`#frames .delta, #frames .errorbox`)); len(wide) > 0 {
		t.Errorf("the frames' long words overflow: %v", wide)
	}
	b.shot("frames")

	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS("Escape to close the detail", `document.getElementById('detail').hidden && !location.hash.startsWith('#/requests/')`, 10*time.Second)
}

// TestBrowserPushTimes: the push panel shows when a config's delivery
// began failing and its next attempt as times a person reads, not the
// JSON's RFC 3339 timestamps with nanoseconds.
func TestBrowserPushTimes(t *testing.T) {
	since := time.Date(2031, 3, 4, 5, 6, 7, 123456789, time.UTC)
	next := since.Add(90 * time.Second)
	view := func(ctx context.Context, principal, taskID string) ([]console.PushDelivery, error) {
		return []console.PushDelivery{{ConfigID: "cfg-1", Host: "hooks.example", Attempts: 3, FailingSince: since, NextAttempt: next}}, nil
	}
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true, console: []console.Option{console.WithPushView(view)}})
	const id = "push-times"
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "task_id": "t-1", "params": map[string]any{}})
	natstest.PublishBurst(t, p.nc, id, 0, 0, natstest.Frame(id, 0, true))
	waitFinal(t, p, id)

	b.openRequest(p.url, id)
	b.waitJS("the push row", `document.querySelector('#d-push tr[data-config="cfg-1"]') !== null`, 15*time.Second)
	b.shot("push-times")
	state := eval[string](b, `document.querySelector('#d-push tr[data-config="cfg-1"]').cells[3].textContent`)
	want := eval[[]string](b, `[fmtTime(`+strconv.Quote(since.Format(time.RFC3339Nano))+`), fmtTime(`+strconv.Quote(next.Format(time.RFC3339Nano))+`)]`)
	if strings.Contains(state, "2031-03-04T") || !strings.Contains(state, want[0]) || !strings.Contains(state, "next attempt "+want[1]) {
		t.Errorf("the push state reads %q, want 3 attempts failing since %q, next attempt %q", state, want[0], want[1])
	}
}

// TestBrowserPlainWording: the empty list says there are no requests yet,
// or that none matches the filters it names; the footer names the index
// as the docs do (KV_E2A_INDEX); the page has an icon (the browser asked
// for /favicon.ico, a 404 in its console).
func TestBrowserPlainWording(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	b.waitJS("the empty list", `!document.getElementById('empty').hidden`, 10*time.Second)
	if s := eval[string](b, `document.getElementById('empty').textContent`); !strings.Contains(s, "No requests yet") {
		t.Errorf("the empty list says %q, want that there are no requests yet", s)
	}
	if s := eval[string](b, `document.querySelector('footer').textContent`); !strings.Contains(s, "KV_E2A_INDEX") {
		t.Errorf("the footer says %q, want the index named KV_E2A_INDEX", s)
	}
	if s := eval[string](b, `(document.querySelector('link[rel=icon]') || {}).href || ''`); !strings.HasPrefix(s, "data:") {
		t.Errorf("the console page's icon is %q, want an inline one", s)
	}
	b.run(chromedp.SendKeys(chromedp.CSS(`#filters input[name=user]`), "nobody"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	b.waitJS("the filtered empty list", `document.getElementById('empty').textContent.includes('nobody')`, 10*time.Second)
	b.shot("empty-filtered")
	if s := eval[string](b, `document.getElementById('empty').textContent`); !strings.Contains(s, "No request matches the filters") || !strings.Contains(s, "user") {
		t.Errorf("the filtered empty list says %q, want that none matches the filters, named", s)
	}
}

// TestBrowserSignInRetryAfter: a sign-in the failure limiter refuses (429)
// shows the wait the server's Retry-After gives, in seconds; the sign-in
// page has an icon too.
func TestBrowserSignInRetryAfter(t *testing.T) {
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "alice", Secret: keyAlice}}},
		ingress.WithAuthLimit(ingress.AuthLimitConfig{MaxFailures: 1, Window: time.Minute, MaxAddresses: 10}))
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true, console: []console.Option{console.WithAuth(authFunc(a)), console.WithChallenge(a.SetChallenge)}})
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS("#login")))
	if s := eval[string](b, `(document.querySelector('link[rel=icon]') || {}).href || ''`); !strings.HasPrefix(s, "data:") {
		t.Errorf("the sign-in page's icon is %q, want an inline one", s)
	}
	// The first wrong key is refused (401), the second unchecked (429,
	// Retry-After: the window's rest, up to 60 s).
	for i, want := range []string{`/^Sign-in failed/`, `/try again in ([1-5][0-9]|60) seconds/`} {
		b.run(chromedp.SendKeys(chromedp.CSS(`#login input[name=secret]`), "ak_wrong_key_"+strconv.Itoa(i)+"_0123456789abcdef"),
			chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
		b.waitJS("sign-in refusal "+strconv.Itoa(i), `(() => { const e = document.getElementById('login-error');
			return !e.hidden && `+want+`.test(e.textContent); })()`, 10*time.Second)
	}
	if msg := eval[string](b, `document.getElementById('login-error').textContent`); strings.Contains(msg, "retry in") {
		t.Errorf("the throttled sign-in says its wait twice: %q", msg)
	}
	b.shot("throttled")
}

// TestBrowserTaskLatest: an interrupted turn the client answered (a
// later turn of its task completed) links, in the list and in its
// detail, to the task's newest turn with that turn's status (task_latest);
// following the link opens that turn.
func TestBrowserTaskLatest(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{})
	task, st := sendV1(t, p, "ask:input the weather", "")
	if st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("first turn: %s", st)
	}
	sendV1(t, p, "Paris", task)
	b.run(chromedp.Navigate(p.url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	b.waitJS("the answered turn's row links its task's newest turn", `(() => {
		const a = document.querySelector('tr.row a.task-latest');
		return !!a && a.textContent.includes('succeeded'); })()`, 20*time.Second)
	b.shot("task-latest")
	latest := eval[string](b, `decodeURIComponent(document.querySelector('tr.row a.task-latest').hash.slice('#/requests/'.length))`)
	asked := eval[string](b, `document.querySelector('tr.row a.task-latest').closest('tr').dataset.id`)
	if latest == "" || latest == asked {
		t.Fatalf("the link names %q from row %q", latest, asked)
	}
	b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/' + encodeURIComponent(` + strconv.Quote(asked) + `)`))
	b.waitJS("the detail says the task's state now", `(() => {
		const a = document.querySelector('#d-summary a.task-latest');
		return !!a && a.textContent.includes('succeeded'); })()`, 10*time.Second)
	// A click in the page (the summary is rendered again as frames arrive:
	// a node chromedp found may be gone when it clicks).
	b.run(chromedp.Evaluate[chromedp.Void](`document.querySelector('#d-summary a.task-latest').click()`))
	b.waitJS("the link opens the newest turn", `document.getElementById('d-id').textContent === `+strconv.Quote(latest), 10*time.Second)
}

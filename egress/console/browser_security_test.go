package console_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// watchJS runs in every document before the page's scripts: it records
// dialogs, CSP violations (an injected handler or script the policy
// stopped) and long tasks (the page's main thread busy over 50 ms) in
// window.__e2aWatch.
const watchJS = `(() => {
  if (window.__e2aWatch) return;
  const w = window.__e2aWatch = {dialogs: [], violations: [], longTasks: [], maxTask: 0, pwned: 0};
  for (const k of ['alert', 'confirm', 'prompt']) window[k] = (m) => { w.dialogs.push(k + ':' + m); };
  document.addEventListener('securitypolicyviolation', (e) => w.violations.push(e.violatedDirective + ' ' + (e.blockedURI || e.sample || '')));
  try {
    new PerformanceObserver((l) => { for (const e of l.getEntries()) { w.longTasks.push(e.duration); w.maxTask = Math.max(w.maxTask, e.duration); } })
      .observe({type: 'longtask', buffered: true});
  } catch (e) { /* no long task timing */ }
  // Huge texts put into the frames list (#frames; over half a million
  // characters: a node added, or a text changed, each counted once).
  w.hugeInFrames = 0;
  const big = (n) => (n.nodeType === Node.TEXT_NODE ? n.data.length : (n.textContent || '').length) > 500000;
  const inFrames = (n) => { const e = n.nodeType === Node.ELEMENT_NODE ? n : n.parentElement; return !!(e && e.closest('#frames')); };
  new MutationObserver((ms) => {
    for (const m of ms) {
      if (m.type === 'characterData') { if (big(m.target) && inFrames(m.target)) w.hugeInFrames++; continue; }
      for (const n of m.addedNodes) if (inFrames(m.target) && big(n)) w.hugeInFrames++;
    }
  }).observe(document, {childList: true, subtree: true, characterData: true});
})()`

// watch installs watchJS on the browser's documents.
func (b *browser) watch() {
	b.t.Helper()
	b.run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchJS})
		return err
	}))
}

// frameOf is a stored frame of request id.
func frameOf(t *testing.T, id string, seq int64, kind, status string, final bool, body any) []byte {
	t.Helper()
	r := e2a.ResponseFor(&e2a.Envelope{RequestID: id})
	r.ResponseID, r.Sequence, r.Timestamp = id+"-"+strconv.FormatInt(seq, 10), seq, e2a.Now()
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	r.IsFinal, r.Status, r.ResponseKind = final, status, kind
	r.Body = e2a.MarshalBody(body)
	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publishEnvelope stores the request envelope of id (pool idle, no agent).
func publishEnvelope(t *testing.T, p *pipeline, id string, env map[string]any) {
	t.Helper()
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	subj, err := subjects.Request("idle", id)
	if err != nil {
		t.Fatal(err)
	}
	env["protocol_version"], env["request_id"] = "1.0", id
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), subj, b); err != nil {
		t.Fatal(err)
	}
}

// openRequest shows request id in the console's detail.
func (b *browser) openRequest(url, id string) {
	b.t.Helper()
	q, _ := json.Marshal(id)
	b.run(chromedp.Navigate(url+"/console"), chromedp.WaitVisible(chromedp.CSS(`#requests`)))
	b.run(chromedp.Evaluate[chromedp.Void](`location.hash = '#/requests/' + encodeURIComponent(` + string(q) + `)`))
}

// TestBrowserRendersAgentTextAsText: an agent's output and a client's
// input are attacker-controlled: markup in any of them (the request id,
// task, method, principal, params; reasoning, text, tool names, arguments
// and results, an ext frame, an error's code and message, an A2A question)
// shows as text in the list, the detail, the transcript, the frames and
// their raw JSON, and nothing of it runs or loads (no dialog, no CSP
// violation, no element made of it).
func TestBrowserRendersAgentTextAsText(t *testing.T) {
	b := newBrowser(t)
	b.watch()
	p := startPipeline(t, pipelineOptions{noAgent: true})
	const x = `<img src=x onerror="window.__e2aWatch.pwned++;alert(1)"><script>alert(2)</script><svg onload=alert(3)>`
	id := "req" + x
	publishEnvelope(t, p, id, map[string]any{"method": "m" + x, "user_id": "u" + x, "task_id": "t" + x,
		"session_id": "s" + x, "params": map[string]any{"text": x, "href": "javascript:alert(4)"}})
	frames := [][]byte{
		frameOf(t, id, 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaReasoning, Delta: "r" + x}),
		frameOf(t, id, 1, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaTool,
			Delta: e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "c" + x, Name: "n" + x, Args: map[string]any{"q" + x: x}}}),
		frameOf(t, id, 2, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaTool,
			Delta: e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: "c" + x, Name: "n" + x, Response: map[string]any{"r": x}}}),
		frameOf(t, id, 3, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "a" + x}),
		frameOf(t, id, 4, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaCustom, Delta: map[string]any{"c": x}}),
		frameOf(t, id, 5, e2a.KindExt, e2a.StatusInProgress, false, map[string]any{"e": x, "url": "javascript:alert(5)"}),
		frameOf(t, id, 6, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: "code" + x, Message: "msg" + x}),
	}
	natstest.PublishBurst(t, p.nc, id, 0, 0, frames...)
	waitFinal(t, p, id)

	b.openRequest(p.url, id)
	b.waitJS("the final frame and the summary", `document.querySelector('#frames li.frame[data-final=true]') !== null &&
		document.getElementById('d-summary').textContent.includes('session')`, 15*time.Second)
	b.waitJS("the list row", `document.querySelectorAll('#requests tbody tr.row').length === 1`, 10*time.Second)
	// Every raw frame and the envelope open too.
	b.run(chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('#frames .raw-toggle').forEach((t) => t.click())`))
	b.run(chromedp.Click(chromedp.CSS(`.tabs button[data-tab=frames]`)))
	b.shot("frames")
	b.run(chromedp.Click(chromedp.CSS(`.tabs button[data-tab=transcript]`)))
	b.shot("transcript")

	made := eval[[]string](b, `Array.from(document.querySelectorAll('img, script:not([src]), svg, iframe, object, embed, a[href^="javascript"]')).map((e) => e.outerHTML)`)
	watched := eval[map[string]any](b, `window.__e2aWatch`)
	if len(made) > 0 || len(watched["dialogs"].([]any)) > 0 || len(watched["violations"].([]any)) > 0 || watched["pwned"].(float64) != 0 {
		t.Fatalf("injected markup became page content: elements %q, watch %v", made, watched)
	}
	text := eval[string](b, `document.body.innerText`)
	for _, want := range []string{"req" + x, "r" + x, "a" + x, "n" + x, "code" + x, "msg" + x, "t" + x, "s" + x, "m" + x} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
}

// TestBrowserHugeFrame: a request whose first frame is a text of a million
// characters (what a NATS server's default max_payload of 1 MiB admits)
// and whose frames then keep coming one by one: the page shows them all
// while its main thread stays responsive, and the raw frame opens. The
// frames list puts the huge text in once (a count, whatever the machine);
// the longest task is bounded loosely (3 s, or 30 times laying out the
// frame's text once in the same page): measured 174 ms against 40 ms once
// on a quiet machine, 1,373 against 196 on another, and in CI beside the
// -race tests 2,074 ms (d4ca29b) and 1,534 against 94 ms (592cfc6): a
// wall-clock figure the machine's load moves by a factor of ten.
func TestBrowserHugeFrame(t *testing.T) {
	b := newBrowser(t)
	b.watch()
	p := startPipeline(t, pipelineOptions{noAgent: true})
	const id, more = "huge-frame", 300
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "params": map[string]any{}})
	big := strings.Repeat("0123456789abcdef", 1_000_000/16)
	last := natstest.PublishBurst(t, p.nc, id, 0, 0,
		frameOf(t, id, 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: big}))

	b.openRequest(p.url, id)
	b.waitJS("the huge frame", `document.querySelectorAll('#frames li.frame').length === 1`, 15*time.Second)
	for i := int64(1); i <= more; i++ {
		last = natstest.PublishBurst(t, p.nc, id, i, last,
			frameOf(t, id, i, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: " piece"}))
	}
	natstest.PublishBurst(t, p.nc, id, more+1, last, natstest.Frame(id, more+1, true))
	b.waitJS("every frame", `document.querySelector('#frames li.frame[data-final=true]') !== null`, 30*time.Second)
	b.waitJS("the whole answer", `(() => { const a = document.querySelector('.t-text .answer'); return !!a && a.textContent.endsWith(' piece'.repeat(300)); })()`, 30*time.Second)
	b.run(chromedp.Click(chromedp.CSS(`.tabs button[data-tab=frames]`)))
	// Opened by the button's own click(), made again while it is closed:
	// a click at the button's place (chromedp.Click) missed it once in CI,
	// the Frames tab's layout not settled on a loaded machine (the
	// screenshot showed the frames, the raw JSON closed).
	b.waitJS("the raw huge frame", `(() => {
		const li = document.querySelector('#frames li.frame[data-seq="0"]'), raw = li && li.querySelector('pre.raw');
		if (raw && raw.hidden) li.querySelector('.raw-toggle').click();
		return !!raw && !raw.hidden && raw.textContent.length > 1000000;
	})()`, 10*time.Second)
	// No screenshot: a full-page one of a million characters laid out
	// took the browser past its 30 s step under -race in CI (1 of 876df57),
	// the watch's read after it too.
	w := eval[map[string]any](b, `window.__e2aWatch`)
	// The yardstick, measured in the same page now (the machine is shared:
	// CI's other tests slow the browser as much as the page): laying out
	// the frame's text once in a <pre>, the least a page showing it does.
	// A page that froze for seconds on a quiet machine (the frame rendered
	// again for every piece, or highlighted at once) is still caught.
	once := eval[float64](b, `(() => {
		const raw = document.querySelector('#frames li.frame[data-seq="0"] pre.raw').textContent;
		let most = 0;
		for (let i = 0; i < 3; i++) {
			const t0 = performance.now(), pre = document.createElement('pre');
			pre.textContent = raw + i;
			document.body.appendChild(pre);
			void document.body.offsetHeight;
			pre.remove();
			most = Math.max(most, performance.now() - t0);
		}
		return most;
	})()`)
	limit := max(3000, 30*once)
	t.Logf("long tasks: %d, longest %.0f ms; laying out the frame's text once %.0f ms; limit %.0f ms; the huge text put in the frames list %v times",
		len(w["longTasks"].([]any)), w["maxTask"].(float64), once, limit, w["hugeInFrames"])
	if w["maxTask"].(float64) > limit {
		t.Errorf("the page's main thread was busy %.0f ms at once (%d long tasks) showing a request with a 1 MB frame, over %.0f ms (30 times laying out its text once: %.0f ms)",
			w["maxTask"].(float64), len(w["longTasks"].([]any)), limit, once)
	}
	// What does not depend on the machine: the frames list puts the huge
	// frame in once, and its raw JSON once when opened; a list rendered
	// again for every frame that comes puts it in 300 times.
	if n := w["hugeInFrames"].(float64); n != 2 {
		t.Errorf("the frames list put the 1 MB frame's text in the page %.0f times, want 2 (its item, its raw JSON)", n)
	}
}

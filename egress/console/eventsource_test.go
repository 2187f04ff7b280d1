package console_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/streams"
)

// eventSourceJS opens a browser EventSource on a request's E2A stream and
// records every event's id and data in window.__es.
const eventSourceJS = `(() => {
  const st = window.__es = {seqs: [], opens: 0, errors: 0, closed: false};
  const es = new EventSource(%q);
  st.es = es;
  es.onopen = () => { st.opens++; };
  es.onerror = () => { st.errors++; st.closed = es.readyState === EventSource.CLOSED; };
  for (const kind of ['e2a.chunk', 'e2a.complete', 'e2a.error', 'message']) {
    es.addEventListener(kind, ev => { st.seqs.push(Number(ev.lastEventId)); });
  }
  return true;
})()`

// TestEventSourceStops: in a real browser, EventSource on a finished
// request receives every frame once, reconnects with Last-Event-ID = the
// final frame, is answered 204 and stops for good; a connection broken
// mid-stream is resumed by the browser itself from its Last-Event-ID, with
// no gap and no duplicate.
func TestEventSourceStops(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{dropAfter: 3, egress: []egress.Option{egress.WithSSERetry(100 * time.Millisecond)}})
	// A pool whose consumer exists but whose workers are all gone: the
	// console's counters say so.
	cfg, err := streams.AgentConsumerConfig("idle", 4)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(t.Context(), streams.RequestsStream, cfg); err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.Navigate(p.url + "/console"))
	b.waitJS("the idle pool flagged", `document.querySelector('#stats tr.no-worker[data-pool=idle] .badge') !== null && document.querySelector('#stats tr.no-worker[data-pool=demo]') === null`, 15*time.Second)
	b.shot("pool-without-worker")

	// A running request (16 frames, 100 ms apart) whose first stream
	// connection breaks after 3 events: the browser resumes by itself.
	running := p.submit(t, `{"params":{"text":"dropped and resumed","frames":12,"delay_ms":100}}`)
	eval[bool](b, fmt.Sprintf(eventSourceJS, "/v1/requests/"+running+"/stream"))
	b.waitJS("the stream to end with a 204", `window.__es.closed === true`, 30*time.Second)
	seqs := eval[[]int](b, `window.__es.seqs`)
	if !slices.Equal(seqs, seqRange(16)) {
		t.Fatalf("frames seen by the browser: %v, want 0..15 once each", seqs)
	}
	froms, codes := p.e2aStreams()
	// Three connections: the first (broken after frames 0-2), the
	// browser's resume from Last-Event-ID 2, and its reconnection after
	// the final frame, answered 204.
	if len(froms) != 3 || froms[0] != "" || froms[1] != "last-event-id:2" || froms[2] != "last-event-id:15" ||
		codes[1] != 200 || codes[2] != 204 {
		t.Fatalf("stream connections: froms %v codes %v", froms, codes)
	}

	// A finished request: every frame once, one reconnection, 204, closed.
	waitFinal(t, p, running)
	eval[bool](b, `(() => { window.__es.es.close(); return true; })()`)
	eval[bool](b, fmt.Sprintf(eventSourceJS, "/v1/requests/"+running+"/stream"))
	b.waitJS("the replay to end with a 204", `window.__es.closed === true`, 30*time.Second)
	if seqs := eval[[]int](b, `window.__es.seqs`); !slices.Equal(seqs, seqRange(16)) {
		t.Fatalf("replayed frames: %v", seqs)
	}
	froms, codes = p.e2aStreams()
	if len(froms) != 5 || froms[3] != "" || froms[4] != "last-event-id:15" || codes[3] != 200 || codes[4] != 204 {
		t.Fatalf("replay connections: froms %v codes %v", froms, codes)
	}
	if opens := eval[int](b, `window.__es.opens`); opens != 1 {
		t.Fatalf("EventSource opened %d times; a 204 must not count as an open", opens)
	}
	// Closed for good: nothing more is asked.
	b.run(chromedp.Sleep(500 * time.Millisecond))
	if froms, _ := p.e2aStreams(); len(froms) != 5 {
		t.Fatalf("EventSource kept reconnecting: %v", froms)
	}
}

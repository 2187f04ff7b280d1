package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestBrowserTaskInputRequired: a turn that ends with a final a2a.task
// frame in state input-required (an HTTP agent wrapping an A2A framework,
// e2a.Response.Interrupt) is shown input-required with its question in the
// page's detail, as the index lists it. It showed "succeeded" with a
// "Completed" transcript: the page's interruptOf read only a2a.stream_event
// status updates.
func TestBrowserTaskInputRequired(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	ctx := t.Context()
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	const id = "task-asks-input"
	subj, _ := subjects.Request("idle", id)
	if _, err := js.Publish(ctx, subj, []byte(`{"protocol_version":"1.0","request_id":"`+id+`","method":"message/send","task_id":"t-ask","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	final := e2a.ResponseFor(&e2a.Envelope{RequestID: id})
	final.ResponseID, final.Sequence, final.Timestamp = id+"-1", 1, e2a.Now()
	final.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	final.IsFinal, final.Status, final.ResponseKind = true, e2a.StatusSucceeded, e2a.KindA2ATask
	final.Body = json.RawMessage(`{"id":"t-ask","contextId":"t-ask","status":{"state":"input-required",` +
		`"message":{"role":"agent","parts":[{"kind":"text","text":"Which city?"}]}}}`)
	fb, err := e2a.MarshalResponse(&final)
	if err != nil {
		t.Fatal(err)
	}
	s0 := natstest.PublishBurst(t, p.nc, id, 0, 0, natstest.Frame(id, 0, false))
	natstest.PublishBurst(t, p.nc, id, 1, s0, fb)
	waitFor(t, 10*time.Second, "the index's entry input-required", func() bool {
		e, err := p.con.Lookup(ctx, id)
		return err == nil && e != nil && e.Status == console.StatusInputRequired
	})

	b.run(chromedp.Navigate(p.url + "/console#/requests/" + id))
	b.waitJS("the final frame and the summary", `document.querySelector('#frames li.frame[data-final=true]') !== null &&
		document.getElementById('d-summary').textContent.includes('pool')`, 15*time.Second)
	badge := eval[string](b, `document.querySelector('#d-status .badge').textContent`)
	asked := eval[bool](b, `document.querySelector('#transcript .t-interrupt') !== null`)
	b.shot("task-input-required")
	if badge != console.StatusInputRequired || !asked {
		t.Fatalf("the detail shows %q (transcript asks: %t) for a turn ended by an a2a.task in input-required, "+
			"which the index lists as %s", badge, asked, console.StatusInputRequired)
	}
}

// TestBadInputNever500: malformed list parameters,
// huge limits and cursors, and ids that are not ids are answered 4xx in
// the console's error shape (or a clamped 200), never 500.
func TestBadInputNever500(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	for _, c := range []struct {
		path string
		want int
	}{
		{"/console/api/requests?limit=100000000", http.StatusOK},
		{"/console/api/requests?before=18446744073709551615", http.StatusOK},
		{"/console/api/requests?before=18446744073709551616", http.StatusBadRequest},
		{"/console/api/requests?before=-1", http.StatusBadRequest},
		{"/console/api/requests?limit=-5", http.StatusBadRequest},
		{"/console/api/requests?since=1h&until=2h", http.StatusBadRequest},
		{"/console/api/requests?since=99999999h", http.StatusBadRequest},
		{"/console/api/requests?status=done", http.StatusBadRequest},
		{"/console/api/requests?request_id=%00&task=%FF", http.StatusOK},
		{"/console/api/requests/" + strings.Repeat("x", 5000), http.StatusBadRequest},
		{"/console/api/requests/a%00b", http.StatusNotFound},
		{"/console/api/requests/never-seen", http.StatusNotFound},
	} {
		resp, b := p.do(t, "GET", c.path, "")
		if resp.StatusCode != c.want {
			t.Errorf("GET %.80s: %d %s, want %d", c.path, resp.StatusCode, b, c.want)
			continue
		}
		if c.want != http.StatusOK {
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Errorf("GET %.80s: %d body %s is not the console's error shape", c.path, resp.StatusCode, b)
			}
		} else if pg := decode[console.Page](t, b); len(pg.Entries) > console.MaxPageSize {
			t.Errorf("GET %.80s: %d entries", c.path, len(pg.Entries))
		}
	}
}

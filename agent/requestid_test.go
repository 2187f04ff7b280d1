package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestInvalidRequestIDFromIntegrator: requests an integrator publishes
// straight on e2a.req.<pool>.<token> with ids outside the grammar (only
// white space, outer white space, a format or line-separator character) each
// end with exactly one final e2a.error invalid_request frame on their own
// subject, without running the handler and without redelivery; the empty id
// (no frame can name it) is terminated; a valid id next to them is served
// normally.
func TestInvalidRequestIDFromIntegrator(t *testing.T) {
	s := startServer(t)
	var served atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		served.Add(1)
		if env.RequestID != "dup" {
			t.Errorf("handler ran for %+q", env.RequestID)
		}
		return w.Complete(map[string]any{"ok": true})
	})
	bad := []string{"\t", "\n", "\r\r", "dup ", " dup", "a\u200bb", "a\u2028b"}
	ids := append([]string{"dup"}, bad...)

	// Every frame arrives on e2a.live.<token>: wait for the finals there.
	finals := make(chan string, 4*len(ids))
	sub, err := s.nc.Subscribe(subjects.AllLive, func(m *nats.Msg) {
		fr, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			t.Errorf("live frame on %s: %v", m.Subject, err)
			return
		}
		if f := fr[len(fr)-1]; f.IsFinal {
			p, _ := subjects.Parse(m.Subject)
			finals <- p.RequestID
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	startWorker(t, s.nc, "ids", h)
	waitConsumer(t, s.js, "ids")

	// The empty id (token "="), first: no frame can name it, so it is
	// terminated; the consumer check below sees it acknowledged.
	for _, id := range append([]string{""}, ids...) {
		subj, err := subjects.Request("ids", id)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(request(id, map[string]any{"text": "hi"}))
		m := nats.NewMsg(subj)
		m.Data = data
		if id == "dup" {
			m.Header.Set(subjects.HeaderMsgID, id)
		}
		if _, err := s.js.PublishMsg(tctx(t), m); err != nil {
			t.Fatalf("publish %+q: %v", id, err)
		}
	}
	got := map[string]int{}
	timeout := time.After(30 * time.Second)
	for len(got) < len(ids) {
		select {
		case id := <-finals:
			got[id]++
		case <-timeout:
			t.Fatalf("final frames after 30 s: %v of %q", got, ids)
		}
	}
	for _, id := range bad {
		frames, raw := storedFrames(t, s.nc, id)
		if len(frames) != 1 || !frames[0].IsFinal || frames[0].ResponseKind != e2a.KindError {
			t.Fatalf("id %+q: frames %+v, want one final error", id, frames)
		}
		if err := e2a.CheckFrames(frames); err != nil {
			t.Fatalf("id %+q: %v", id, err)
		}
		body := string(raw[0].Data)
		if !strings.Contains(body, e2a.ErrCodeInvalidRequest) || !strings.Contains(body, "invalid request id") {
			t.Fatalf("id %+q: error frame %s", id, body)
		}
		if h := raw[0].Header.Get(subjects.HeaderMsgID); h != "" {
			t.Fatalf("id %+q: frame carries Nats-Msg-Id %+q", id, h)
		}
	}
	if fr, _ := storedFrames(t, s.nc, "dup"); len(fr) != 1 || fr[0].ResponseKind != e2a.KindComplete {
		t.Fatalf("dup: frames %+v", fr)
	}
	if fr, _ := storedFrames(t, s.nc, ""); len(fr) != 0 {
		t.Fatalf("empty id: %d frames", len(fr))
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	// Every delivery is acknowledged once: nothing pending, nothing redelivered.
	name, _ := streams.AgentConsumerName("ids")
	cons, err := s.js.Consumer(tctx(t), streams.RequestsStream, name)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "every delivery acknowledged", func() bool {
		info, err := cons.Info(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.NumRedelivered != 0 {
			t.Fatalf("%d redelivered", info.NumRedelivered)
		}
		return info.NumAckPending == 0 && info.NumPending == 0
	})
}

// TestNonCanonicalSubjectTokenRefused: a request an integrator publishes on
// e2a.req.<pool>.<token> whose token is not the canonical encoding of any
// id (a marked token encoding a plain id, a character outside the plain
// set without the marker) is stored under that subject, where no read by
// its envelope's request_id finds it. It is answered, once, with a final
// e2a.error invalid_request frame on its envelope id's response subject
// that names the subject to publish on, and the handler never runs: it ran
// under the envelope's id before, with frames no replay could pair with
// their request.
func TestNonCanonicalSubjectTokenRefused(t *testing.T) {
	s := startServer(t)
	var served atomic.Int32
	startWorker(t, s.nc, "ids", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		served.Add(1)
		return w.Complete(map[string]any{"ok": true})
	}))
	waitConsumer(t, s.js, "ids")
	cases := map[string]string{"=YWJj": "tok-abc", "a!b": "tok-bang"} // token → the envelope's request_id
	for tok, id := range cases {
		data, _ := json.Marshal(request(id, map[string]any{"text": "hi"}))
		if _, err := s.js.Publish(tctx(t), "e2a.req.ids."+tok, data); err != nil {
			t.Fatalf("publish on token %q: %v", tok, err)
		}
	}
	for tok, id := range cases {
		var frames []*e2a.Response
		var raw []streams.RawMsg
		testkit.Eventually(t, 10*time.Second, "the error frame of "+id, func() bool {
			frames, raw = storedFrames(t, s.nc, id)
			return len(frames) > 0
		})
		if len(frames) != 1 || !frames[0].IsFinal || frames[0].ResponseKind != e2a.KindError {
			t.Fatalf("token %q: frames %+v, want one final error", tok, frames)
		}
		want, _ := subjects.Request("ids", id)
		body := string(raw[0].Data)
		if !strings.Contains(body, e2a.ErrCodeInvalidRequest) || !strings.Contains(body, want) || !strings.Contains(body, tok) {
			t.Fatalf("token %q: error frame %s, want %s naming %s and %s", tok, body, e2a.ErrCodeInvalidRequest, tok, want)
		}
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("handler ran %d times for requests on non-canonical subjects", n)
	}
}

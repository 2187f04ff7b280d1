package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// ACP over HTTP sends a session/prompt and its session/cancel as two
// requests: the cancel can be handled while the prompt, received before
// it, is not yet recorded in the session. These tests hold such a prompt
// between its receipt and its record (ingress.SetAppendHook), send the
// cancel, then let the prompt be recorded.

// acpHeld is a pipeline whose pool demo serves the demo agent, but holds
// a prompt sent with params.hold (after one text chunk) until it is
// cancelled or let go (letGo), and which sees the pipeline's requests.
type acpHeld struct {
	p        *pipetest.Pipeline
	requests chan *nats.Msg // the requests published, as they are
	letGo    chan struct{}  // closed: held requests run on (the demo's answer)
	once     sync.Once
}

func startACPHeld(t *testing.T, opts ...pipetest.Option) *acpHeld {
	t.Helper()
	h := &acpHeld{requests: make(chan *nats.Msg, 64), letGo: make(chan struct{})}
	h.p = pipetest.Start(t, opts...)
	h.p.Pool("demo", agent.HandlerFunc(h.serve))
	t.Cleanup(h.release) // before the pool stops (cleanups run last first)
	sub, err := h.p.NC.ChanSubscribe(subjects.AllRequests, h.requests)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := h.p.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *acpHeld) serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	if env.Params["hold"] == true {
		if err := w.Chunk(e2a.DeltaText, "held "); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.letGo:
		}
	}
	return demo.New().Serve(ctx, env, w)
}

func (h *acpHeld) release() { h.once.Do(func() { close(h.letGo) }) }

// request returns the id of the next request published.
func (h *acpHeld) request(t *testing.T) string {
	t.Helper()
	m := testkit.Receive(t, h.requests, 15*time.Second, "no request published")
	_, id, err := subjects.ParseRequest(m.Subject)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// cancelStored reports whether a cancel of request id is stored.
func (h *acpHeld) cancelStored(t *testing.T, id string) bool {
	t.Helper()
	subj, err := subjects.Control(id)
	if err != nil {
		t.Fatal(err)
	}
	_, err = streams.LastBySubject(context.Background(), h.p.NC, streams.ControlStream, subj)
	if errors.Is(err, streams.ErrNoMessages) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// holdTurn holds the first append of a turn of one session in a server's
// task store: that prompt is received and not recorded until let.
type holdTurn struct {
	held, release chan struct{}
	once, letOnce sync.Once
}

func holdFirstTurn(t *testing.T, s *ingress.Server, sid string) *holdTurn {
	h := &holdTurn{held: make(chan struct{}), release: make(chan struct{})}
	ingress.SetAppendHook(s, func(kind, id, _ string) {
		if kind != ingress.KindSession || id != sid {
			return
		}
		first := false
		h.once.Do(func() { first = true; close(h.held) })
		if first {
			<-h.release
		}
	})
	t.Cleanup(func() { ingress.SetAppendHook(s, nil); h.let() })
	return h
}

// let lets the held append run.
func (h *holdTurn) let() { h.letOnce.Do(func() { close(h.release) }) }

// acpPost posts one ACP message to url+"/acp", with key as X-Api-Key
// when not empty.
func acpPost(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	var hdr []string
	if key != "" {
		hdr = []string{"X-Api-Key", key}
	}
	return testkit.Open(t, http.MethodPost, url+"/acp", body, hdr...)
}

// acpNewSession opens a session at url and returns its id.
func acpNewSession(t *testing.T, url, key string) string {
	t.Helper()
	b, _ := io.ReadAll(acpPost(t, url, key, `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`).Body)
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &res) != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new: %s", b)
	}
	return res.Result.SessionID
}

func promptBody(id, sid, text string, hold bool) string {
	extra := ""
	if hold {
		extra = `,"hold":true`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"` + sid +
		`","prompt":[{"type":"text","text":"` + text + `"}]` + extra + `}}`
}

func cancelBody(sid string) string {
	return `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`
}

// cancelNotified posts session/cancel as a notification: answered 204 once
// handled.
func cancelNotified(t *testing.T, url, key, sid string) {
	t.Helper()
	resp := acpPost(t, url, key, cancelBody(sid))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("session/cancel: %d %q", resp.StatusCode, b)
	}
}

// acpLines posts a prompt and returns its answer's lines as they come
// (closed at its end).
func acpLines(t *testing.T, url, key, body string) <-chan []byte {
	t.Helper()
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		req, err := http.NewRequest(http.MethodPost, url+"/acp", strings.NewReader(body))
		if err != nil {
			return
		}
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				out <- append([]byte(nil), sc.Bytes()...)
			}
		}
	}()
	return out
}

// stopReason reads a prompt's answer to its end and returns its
// stopReason. The prompt's request, id, was sent with params.hold: when it
// streams an update before its answer, its submission has returned, and a
// prompt that is to end cancelled has its cancel stored by then; one
// that has none is let go (h.release), and fails t, so that it ends.
func (h *acpHeld) stopReason(t *testing.T, lines <-chan []byte, id string, wantCancel bool) string {
	t.Helper()
	checked := false
	for {
		var b []byte
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the prompt's answer ended without its result")
			}
			b = line
		case <-time.After(15 * time.Second):
			t.Fatal("the prompt's answer did not end")
		}
		m := decodeMsg(t, b)
		if m.Method == "session/update" {
			if !checked && wantCancel {
				checked = true
				if !h.cancelStored(t, id) {
					t.Errorf("request %s, a prompt received before the session/cancel, streams and has no cancel", id)
					h.release()
				}
			}
			continue
		}
		if m.Error != nil {
			t.Fatalf("prompt answered an error: %+v", m.Error)
		}
		var res struct {
			StopReason string `json:"stopReason"`
		}
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatalf("prompt result %s: %v", m.Result, err)
		}
		return res.StopReason
	}
}

// TestACPCancelBeforePromptRecorded: a session/prompt is received, then
// a session/cancel of its session is received and answered while the
// prompt is not yet recorded in the session (held before its append);
// then the prompt is recorded. It must end cancelled, as it would have had
// the cancel found it recorded: over one replica, and with the prompt and
// the cancel on two replicas (two ingress servers on one NATS).
func TestACPCancelBeforePromptRecorded(t *testing.T) {
	for _, two := range []bool{false, true} {
		name := "one replica"
		if two {
			name = "two replicas"
		}
		t.Run(name, func(t *testing.T) {
			h := startACPHeld(t)
			cancelURL := h.p.URL
			if two {
				reg := prometheus.NewRegistry()
				cancelURL = pipetest.ServeFront(t, h.p.NC, []egress.Option{egress.WithRegisterer(reg), egress.WithProjections(protocols.FillProjections)},
					ingress.WithRegisterer(reg)).URL
			}
			sid := acpNewSession(t, h.p.URL, "")
			hold := holdFirstTurn(t, h.p.Ingress, sid)
			lines := acpLines(t, h.p.URL, "", promptBody("1", sid, "first", true))
			testkit.Receive(t, hold.held, 15*time.Second, "the prompt did not reach its record")
			cancelNotified(t, cancelURL, "", sid)
			hold.let()
			id := h.request(t)
			if stop := h.stopReason(t, lines, id, true); stop != "cancelled" {
				t.Fatalf("a prompt received before the session/cancel and recorded after it ended %q, want cancelled", stop)
			}
		})
	}
}

// TestACPPromptAfterCancelRuns: a prompt received before a session/cancel
// and recorded after it ends cancelled, while a prompt received after the
// cancel (recorded before the first one) runs to end_turn; and a
// session/cancel when nothing was prompted leaves the next prompt alone.
func TestACPPromptAfterCancelRuns(t *testing.T) {
	h := startACPHeld(t)
	sid := acpNewSession(t, h.p.URL, "")
	cancelNotified(t, h.p.URL, "", sid) // nothing to cancel
	msgs := ndjsonMsgs(t, acpPost(t, h.p.URL, "", promptBody("1", sid, "after an idle cancel", false)).Body)
	checkTurn(t, msgs, sid, "1", "after an idle cancel", "end_turn")
	h.request(t)

	hold := holdFirstTurn(t, h.p.Ingress, sid)
	first := acpLines(t, h.p.URL, "", promptBody("2", sid, "first", true))
	testkit.Receive(t, hold.held, 15*time.Second, "the prompt did not reach its record")
	cancelNotified(t, h.p.URL, "", sid)
	msgs = ndjsonMsgs(t, acpPost(t, h.p.URL, "", promptBody("3", sid, "second", false)).Body)
	checkTurn(t, msgs, sid, "3", "second", "end_turn")
	h.request(t) // the second prompt's
	hold.let()
	id := h.request(t)
	if stop := h.stopReason(t, first, id, true); stop != "cancelled" {
		t.Fatalf("the prompt received before the session/cancel ended %q, want cancelled", stop)
	}
}

// TestACPOtherPrincipalCancelBeforePromptRecorded: bob's session/cancel of
// alice's session, received while alice's prompt is not yet recorded, is
// refused and marks nothing: alice's prompt runs to end_turn.
func TestACPOtherPrincipalCancelBeforePromptRecorded(t *testing.T) {
	const alice, bob = "ak_alice_0123456789abcdef", "ak_bob_0123456789abcdefgh"
	h := startACPHeld(t, pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t,
		map[string]string{"alice": alice, "bob": bob}, nil))))
	sid := acpNewSession(t, h.p.URL, alice)
	hold := holdFirstTurn(t, h.p.Ingress, sid)
	lines := acpLines(t, h.p.URL, alice, promptBody("1", sid, "mine", false))
	testkit.Receive(t, hold.held, 15*time.Second, "the prompt did not reach its record")
	_, _ = io.ReadAll(acpPost(t, h.p.URL, bob, cancelBody(sid)).Body)
	c := ndjsonMsgs(t, acpPost(t, h.p.URL, bob, `{"jsonrpc":"2.0","id":4,"method":"session/cancel","params":{"sessionId":"`+sid+`"}}`).Body)
	if len(c) != 1 || c[0].Error == nil || c[0].Error.Code != -32002 {
		t.Fatalf("another principal's session/cancel must be -32002: %+v", c)
	}
	hold.let()
	var msgs []rpcMsg
	for b := range lines {
		msgs = append(msgs, decodeMsg(t, b))
	}
	checkTurn(t, msgs, sid, "1", "mine", "end_turn")
}

package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// gatedBody is a request body whose first Read signals started and then
// waits for release. Sent with "Expect: 100-continue", the client reads it
// only once the server's handler reads the body (net/http sends 100
// Continue then): the handler has begun, its host.Call.Received is taken
// (serveRPC, before the gate), and its call is not handled until release.
type gatedBody struct {
	started, release chan struct{}
	once             sync.Once
	r                io.Reader
}

func (g *gatedBody) Read(p []byte) (int, error) {
	g.once.Do(func() { close(g.started) })
	<-g.release
	return g.r.Read(p)
}

// TestACPPromptReceivedAfterCancelRuns: the session/cancel is
// received first (its HTTP handler has begun), then a session/prompt of
// the session is received, recorded and published before the cancel's
// call is handled (a client firing the cancel notification and its next
// prompt without waiting for the cancel's 204; a cancel slow in the gate
// or on another replica). The prompt was received after the cancel, so it
// runs (docs/protocols.md), though the record the cancel's mark returns
// holds it: CancelTurns leaves a turn whose envelope says it was received
// at or after the cancel (host.Session.CancelBefore).
func TestACPPromptReceivedAfterCancelRuns(t *testing.T) {
	h := startACPHeld(t)
	sid := acpNewSession(t, h.p.URL, "")

	g := &gatedBody{started: make(chan struct{}), release: make(chan struct{}), r: strings.NewReader(cancelBody(sid))}
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	req, err := http.NewRequest(http.MethodPost, h.p.URL+"/acp", g)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(cancelBody(sid)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	done := make(chan int, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			done <- -1
			return
		}
		_, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	testkit.Receive(t, g.started, 15*time.Second, "the cancel's handler did not read its body")

	// The prompt, received after the cancel: recorded and published
	// (streaming "held ") while the cancel is not yet handled.
	lines := acpLines(t, h.p.URL, "", promptBody("1", sid, "after the cancel", true))
	id := h.request(t)
	testkit.Receive(t, lines, 15*time.Second, "the prompt streamed nothing")

	close(g.release)
	if code := testkit.Receive(t, done, 15*time.Second, "the cancel was not answered"); code != http.StatusNoContent {
		t.Fatalf("session/cancel answered %d, want 204", code)
	}
	// The cancel's handler has returned: any cancel it sent is stored.
	cancelled := h.cancelStored(t, id)
	h.release()
	stop := h.stopReason(t, lines, id, false)
	if cancelled || stop != "end_turn" {
		t.Fatalf("a prompt received after the session/cancel (cancel stored: %v) ended %q, want end_turn", cancelled, stop)
	}
}

// TestACPQueuedPromptCancelBeforeRecorded (a guard): a prompt is
// running when a second prompt of its session is received and held before
// its record; a session/cancel then cancels the running one and marks the
// session; the second, recorded after the mark and queued behind the
// first, has its cancel stored by its first update and ends cancelled.
func TestACPQueuedPromptCancelBeforeRecorded(t *testing.T) {
	h, sid, first, firstID := heldPrompt(t)

	hold := holdFirstTurn(t, h.p.Ingress, sid)
	second := acpLines(t, h.p.URL, "", promptBody("2", sid, "second", true))
	testkit.Receive(t, hold.held, 15*time.Second, "the second prompt did not reach its record")
	cancelNotified(t, h.p.URL, "", sid)
	if stop := h.stopReason(t, first, firstID, false); stop != "cancelled" {
		t.Fatalf("the running prompt ended %q, want cancelled", stop)
	}
	hold.let()
	secondID := h.request(t)
	if stop := h.stopReason(t, second, secondID, true); stop != "cancelled" {
		t.Fatalf("the queued prompt, received before the cancel and recorded after it, ended %q, want cancelled", stop)
	}
}

// TestACPFastPromptCancelBeforeRecorded: TestACPCancelBeforePromptRecorded
// with an agent that answers at once (the demo agent, no hold), over
// several sessions: a prompt received before the session/cancel and
// recorded after its mark ends cancelled, never run to end_turn, however
// fast the agent: its cancel is stored before its publish as well as after
// it (cancelReceivedBefore), so the running worker has it at pick-up.
func TestACPFastPromptCancelBeforeRecorded(t *testing.T) {
	const rounds = 16
	h := startACPHeld(t)
	var ran []string
	for i := range rounds {
		sid := acpNewSession(t, h.p.URL, "")
		hold := holdFirstTurn(t, h.p.Ingress, sid)
		lines := acpLines(t, h.p.URL, "", promptBody("1", sid, "first", false))
		testkit.Receive(t, hold.held, 15*time.Second, "the prompt did not reach its record")
		cancelNotified(t, h.p.URL, "", sid)
		hold.let()
		id := h.request(t)
		var stop string
		for b := range lines {
			m := decodeMsg(t, b)
			if m.Method == "session/update" {
				continue
			}
			var res struct {
				StopReason string `json:"stopReason"`
			}
			if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
				t.Fatalf("prompt answered %s", b)
			}
			stop = res.StopReason
		}
		if stop != "cancelled" {
			ran = append(ran, fmt.Sprintf("round %d: %s ended %q (its cancel stored: %v)", i, id, stop, h.cancelStored(t, id)))
		}
	}
	if len(ran) > 0 {
		t.Fatalf("%d of %d prompts received before the session/cancel and recorded after its mark ran instead of ending cancelled:\n%s",
			len(ran), rounds, strings.Join(ran, "\n"))
	}
}

// TestE2ATurnOfACPSessionCancelBeforeRecorded: an E2A request naming an
// ACP session (session_id) is a turn of that session; received before a
// session/cancel of it and recorded after the cancel's mark, it ends
// cancelled like a session/prompt would (its front door says when it was
// received: host.Turn.Received).
func TestE2ATurnOfACPSessionCancelBeforeRecorded(t *testing.T) {
	h := startACPHeld(t)
	sid := acpNewSession(t, h.p.URL, "")
	hold := holdFirstTurn(t, h.p.Ingress, sid)
	done := make(chan string, 1)
	go func() {
		resp, err := http.Post(h.p.URL+"/v1/requests?wait=true", "application/json",
			strings.NewReader(`{"session_id":"`+sid+`","params":{"text":"first","hold":true}}`))
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	testkit.Receive(t, hold.held, 15*time.Second, "the E2A turn did not reach its record")
	cancelNotified(t, h.p.URL, "", sid)
	hold.let()
	id := h.request(t)
	body := testkit.Receive(t, done, 30*time.Second, "no answer to the E2A turn")
	if !strings.Contains(body, `"cancelled"`) {
		t.Fatalf("an E2A turn of the session received before its session/cancel and recorded after it (%s) answered %s, want cancelled", id, body)
	}
}

// TestACPCancelNotHeldByUnpublishedTurn: a session/cancel reads the
// session while its record lists P after the running prompt, P a prompt
// whose publish then fails (taken out of the record again, never stored:
// here an id never published, the record not listing it). The cancel
// awaited P's store up to the publish wait (6 s) before it cancelled the
// running prompt, not noticing P was taken out; it reads the record again
// as it waits now (egress.WithListing), and cancels at once.
func TestACPCancelNotHeldByUnpublishedTurn(t *testing.T) {
	h, sid, first, firstID := heldPrompt(t)
	unpublished := uuid.Must(uuid.NewV7()).String()
	from := time.Now()
	if err := ingress.CancelSessionAsRead(context.Background(), h.p.Ingress, sid, []string{firstID, unpublished}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(from); took > quick {
		t.Errorf("the cancel took %v: held by a prompt listed when read and taken out of the record since", took)
	}
	if stop := h.stopReason(t, first, firstID, false); stop != "cancelled" {
		t.Fatalf("the running prompt ended %q, want cancelled", stop)
	}
}

// heldPrompt starts an acpHeld pipeline, opens a session sid and sends
// the prompt "first" held running (its request firstID has streamed its
// first update): the session's running turn, its answer's lines first.
func heldPrompt(t *testing.T) (h *acpHeld, sid string, first <-chan []byte, firstID string) {
	t.Helper()
	h = startACPHeld(t)
	sid = acpNewSession(t, h.p.URL, "")
	first = acpLines(t, h.p.URL, "", promptBody("1", sid, "first", true))
	firstID = h.request(t)
	testkit.Receive(t, first, 15*time.Second, "the first prompt streamed nothing")
	return h, sid, first, firstID
}

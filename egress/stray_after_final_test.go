package egress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestStrayAfterFinalNeverRunning: a request whose final frame is stored
// has ended, whatever was stored after it (by hand, a rogue writer). A poll
// past its last stored frame (no snapshot reader: ?from=4, ?from=9) was
// answered 202 "running", Finished false, Continuable true, and a cancel
// was sent to it: each read only the last stored message, a stray frame.
func TestStrayAfterFinalNeverRunning(t *testing.T) {
	h := startHTTP(t)
	const id = "zz_stray_after_final"
	w := h.running(t, id)
	w.text("a")
	w.complete("a")
	w.text("stray") // sequence 2, after the final frame 1
	w.text("stray") // sequence 3
	for _, q := range []string{"?from=4", "?from=9"} {
		resp := h.get(t, "/v1/requests/"+id+q)
		var v RequestView
		err := json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || v.State != StateSucceeded || v.NextSequence != 2 {
			t.Errorf("%s: %d, state %q, next %d (%v); want 200, %s, next 2", q, resp.StatusCode, v.State, v.NextSequence, err, StateSucceeded)
		}
	}
	ctx := t.Context()
	if done, err := h.svc.Finished(ctx, id); err != nil || !done {
		t.Errorf("Finished: %v (%v), want true", done, err)
	}
	if open, err := h.svc.Continuable(ctx, id); err != nil || open {
		t.Errorf("Continuable: %v (%v), want false: its final frame completed it", open, err)
	}
	_, err := h.svc.CancelRequest(ctx, id, func(context.Context, string) error {
		t.Error("a cancel was sent to a request that has ended")
		return nil
	})
	if !errors.Is(err, ErrNotCancelable) {
		t.Errorf("CancelRequest: %v, want ErrNotCancelable", err)
	}
	if turns, err := h.svc.UnendedTurns(ctx, []string{id}); err != nil || len(turns) != 0 {
		t.Errorf("UnendedTurns: %v (%v), want none", turns, err)
	}
}

// TestPollOfRunningRequestReadsNoFrame: finding a final frame stored
// before a last one that is not final (TestStrayAfterFinalNeverRunning)
// costs a running request's poll past its last frame no read of its
// frames: the first message's fence says none is before it, a reader that
// read them (the snapshot) or one read of them is remembered, and a next
// message fenced on one known is taken without reading again.
func TestPollOfRunningRequestReadsNoFrame(t *testing.T) {
	h := startHTTP(t)
	nc := h.conn(t)
	gets, err := nc.SubscribeSync("$JS.API.DIRECT.GET." + DefaultResponsesStream) // batched gets only
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	poll := func(id, q string) {
		t.Helper()
		resp := h.get(t, "/v1/requests/"+id+q)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s%s: %d, want 202", id, q, resp.StatusCode)
		}
	}
	reads := func() int {
		t.Helper()
		if err := h.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, _ := gets.Pending()
		for range n {
			_, _ = gets.NextMsg(0)
		}
		return n
	}
	w := h.running(t, "zz_poll_running")
	w.text("a")
	poll("zz_poll_running", "?from=1")
	poll("zz_poll_running", "?from=1")
	if n := reads(); n != 0 {
		t.Errorf("polls past the first frame: %d reads of the frames, want none (nothing is before it)", n)
	}
	w.text("b")
	poll("zz_poll_running", "?from=2")
	w.text("c")
	poll("zz_poll_running", "?from=3")
	if n := reads(); n != 0 {
		t.Errorf("polls past each next frame: %d reads of the frames, want none (each fenced on one known)", n)
	}
	w2 := h.running(t, "zz_poll_unknown")
	w2.text("a")
	w2.text("b")
	w2.text("c")
	h.svc.unended = openRequests{} // as a replica that never read it
	poll("zz_poll_unknown", "?from=3")
	poll("zz_poll_unknown", "?from=3")
	if n := reads(); n != 1 {
		t.Errorf("polls past the last of 3 frames never read: %d reads of the frames, want 1 (then remembered)", n)
	}
}

// TestStrayAfterFinalInAStreamMadeAgain: E2A_RESPONSES removed and made
// again (its sequences start over at 1) while this process remembers,
// for a request, a stream sequence of the old stream up to which no
// final frame was stored: that sequence is past the new stream's last
// message of the request, and was taken for "nothing to read", so a
// final frame stored before a stray frame in the new stream went unseen.
func TestStrayAfterFinalInAStreamMadeAgain(t *testing.T) {
	h := startHTTP(t)
	const id = "zz_stray_remade"
	ctx := t.Context()
	w := h.running(t, id)
	w.text("a")
	w.text("b")
	w.text("c")
	if done, err := h.svc.Finished(ctx, id); err != nil || done {
		t.Fatalf("Finished before the remake: %v (%v), want false", done, err)
	}
	if err := h.js.DeleteStream(ctx, DefaultResponsesStream); err != nil {
		t.Fatal(err)
	}
	if _, err := h.js.CreateStream(ctx, natstest.Config().ResponsesStreamConfig()); err != nil {
		t.Fatal(err)
	}
	w.seq, w.lastSeq = 0, 0
	w.complete("a") // stream sequence 1
	w.text("stray") // 2, fenced on 1
	if done, err := h.svc.Finished(ctx, id); err != nil || !done {
		t.Errorf("Finished after the remake: %v (%v), want true: its final frame is stored", done, err)
	}
}

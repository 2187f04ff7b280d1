package egress

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// A request still running whose envelope left E2A_REQUESTS (stored before
// its frames, it is dropped first: by E2A_REQUESTS_MAX_AGE for a request
// running longer, or by its byte limit) is read from the History's copy,
// which holds no final frame yet, and then followed in the hot streams:
// its owner's stream gets every frame, those written after the read began
// included, and ends with the final one. It ended after the History's
// frames with "the history holds no final frame, and no frame will come"
// (found on a live e2a dev with E2A_REQUESTS_MAX_AGE=20s, a request of 36 s).
func TestHistoryFollowsARunningRequestInTheHotStreams(t *testing.T) {
	fh := newFakeHistory()
	e, srv := historyHTTP(t, fh)
	id := uuid.Must(uuid.NewV7()).String()
	w := e.running(t, id)
	w.text("a ")
	w.text("b ")
	fh.reqs[id] = storedHistoric(t, e, id)
	natstest.Purge(t, e.js, streams.RequestsStream)

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/requests/"+id+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "owner")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the stream ended early (%v)", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", lines.Bytes(), err)
		}
		return m
	}
	for want := range 2 {
		if m := next(); m["sequence"] != float64(want) {
			t.Fatalf("from the History: %v, want frame %d", m, want)
		}
	}
	// The History's frames are out: the rest comes as the request runs.
	w.text("c ")
	w.complete(map[string]any{"content": "a b c"})
	if m := next(); m["sequence"] != float64(2) {
		t.Fatalf("the next frame written: %v, want frame 2 (the History holds no final frame, and the hot streams are not read)", m)
	}
	if m := next(); m["sequence"] != float64(3) || m["response_kind"] != e2a.KindComplete {
		t.Fatalf("the final frame: %v", m)
	}
	if lines.Scan() {
		t.Fatalf("after the final frame: %s", lines.Bytes())
	}
}

// The aggregated JSON of such a request is the hot streams' too, with the
// copy's envelope: ?wait=true waits for its final frame and answers it
// whole (it answered 504 at once, "no frame will come", the request still
// running), and a read without wait has every frame stored, not the
// copy's.
func TestHistoryJSONOfARunningRequestFromTheHotStreams(t *testing.T) {
	fh := newFakeHistory()
	e, srv := historyHTTP(t, fh)
	id := uuid.Must(uuid.NewV7()).String()
	w := e.running(t, id)
	w.text("a ")
	fh.reqs[id] = storedHistoric(t, e, id)
	natstest.Purge(t, e.js, streams.RequestsStream)
	w.text("b ")
	base := srv.URL + "/v1/requests/" + id
	var view RequestView
	a := read(t, base, "owner")
	if err := json.Unmarshal([]byte(a.Body), &view); err != nil || a.Status != http.StatusAccepted || view.State != StateRunning || len(view.Frames) != 2 || view.NextSequence != 2 {
		t.Fatalf("json of a running request whose envelope is gone: %+v (%v), want 202 running with the 2 frames stored", a, err)
	}
	if len(view.Envelope) == 0 {
		t.Fatalf("json without the envelope: %s", a.Body)
	}
	w.complete(map[string]any{"content": "a b"})
	for _, path := range []string{"?wait=true", ""} {
		view = RequestView{}
		a = read(t, base+path, "owner")
		if err := json.Unmarshal([]byte(a.Body), &view); err != nil || a.Status != http.StatusOK || view.State != StateSucceeded || len(view.Frames) != 3 || len(view.Envelope) == 0 {
			t.Errorf("json%s once it ended: %+v (%v), want 200 succeeded with its envelope and 3 frames", path, a, err)
		}
	}
}

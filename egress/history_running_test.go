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

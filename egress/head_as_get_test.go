package egress

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// headMatchesGet checks that a HEAD of url answers the status and content
// type its GET answers (RFC 9110 §9.3.2).
func headMatchesGet(t *testing.T, what, url string, hdr ...string) {
	t.Helper()
	get := testkit.Open(t, http.MethodGet, url, "", hdr...)
	_, _ = io.Copy(io.Discard, get.Body)
	head := testkit.Open(t, http.MethodHead, url, "", hdr...)
	if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
		t.Errorf("%s: HEAD answers %d %q, GET %d %q", what, head.StatusCode, head.Header.Get("Content-Type"), get.StatusCode, get.Header.Get("Content-Type"))
	}
}

// TestStreamHeadAnswersAsGetBeyondTheHotStreams: a HEAD of a request's
// stream answered 200 (or 404) from the envelope alone where its GET
// reads the frames: 410 frames_expired for a request whose frames aged
// out, 204 for a resume past the final frame of a request read from the
// History, 200 for a request whose envelope aged out while its frames are
// still hot (HEAD said 404).
func TestStreamHeadAnswersAsGetBeyondTheHotStreams(t *testing.T) {
	t.Run("frames aged out, no History", func(t *testing.T) {
		h := startHTTP(t, WithWaitLimits(5*time.Second, 5*time.Second))
		id := uuid.Must(uuid.NewV7()).String()
		h.finished(t, id, 3)
		ackPending(t, h.testEnv, 1)
		natstest.Purge(t, h.js, streams.ResponsesStream)
		headMatchesGet(t, "frames aged out", h.srv.URL+"/v1/requests/"+id+"/stream")
	})
	t.Run("History, past the final frame", func(t *testing.T) {
		fh := newFakeHistory()
		e, srv := historyHTTP(t, fh)
		id := historicRequest(t, e)
		fh.reqs[id] = storedHistoric(t, e, id)
		natstest.Purge(t, e.js, streams.ResponsesStream)
		natstest.Purge(t, e.js, streams.RequestsStream)
		headMatchesGet(t, "from the History, past the final frame", srv.URL+"/v1/requests/"+id+"/stream?from=99", "X-Api-Key", "owner")
	})
	t.Run("envelope aged out, frames hot", func(t *testing.T) {
		h := startHTTP(t)
		h.finished(t, "zz_head_frames_only", 2)
		natstest.Purge(t, h.js, streams.RequestsStream)
		headMatchesGet(t, "frames without envelope", h.srv.URL+"/v1/requests/zz_head_frames_only/stream")
	})
}

package egress

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// frameReads are the views of a request that the frame contract tests
// read: the aggregated JSON (whole, waited for), the SSE and NDJSON
// streams, and each resumed at from.
func frameReads(from int64) []testkit.Read {
	q := fmt.Sprintf("?from=%d", from)
	return append(expiredReads[:len(expiredReads):len(expiredReads)],
		testkit.Read{Name: "json " + q, Path: q},
		testkit.Read{Name: "sse " + q, Path: "/stream" + q},
		testkit.Read{Name: "ndjson " + q, Path: "/stream" + q, Hdr: []string{"Accept", "application/x-ndjson"}})
}

// wantInvalidFrame checks that each read of request id is answered 502
// invalid_frame.
func wantInvalidFrame(t *testing.T, h *httpEnv, id string, reads []testkit.Read) {
	t.Helper()
	for _, rd := range reads {
		a := testkit.Get(t, h.srv.URL+"/v1/requests/"+id+rd.Path, rd.Hdr...)
		if a.Status != http.StatusBadGateway || !strings.Contains(a.Body, `"code":"`+CodeInvalidFrame+`"`) {
			t.Errorf("%s, %s: %+v, want 502 %s", id, rd.Name, a, CodeInvalidFrame)
		}
	}
}

// frameAt is frame seq of w's request (a text chunk), as stored.
func (w *writer) frameAt(seq int64) []byte {
	w.t.Helper()
	r := w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "x"})
	r.Sequence = seq
	data, err := e2a.MarshalResponse(r)
	if err != nil {
		w.t.Fatal(err)
	}
	return data
}

// TestNoFrameWithSequenceHeader: a stored message that is JSON but no
// frame (null, {}, an object without a sequence) under an E2A-Sequence
// header 0 was delivered as frame 0 (its missing sequence read as 0, the
// header's), {"is_final":true} as a final frame 0; a read resumed past it
// skipped it. It is no frame, 502 invalid_frame to every read that meets
// it, as bytes that are not JSON are (TestStreamResumedPastNonFrame).
func TestNoFrameWithSequenceHeader(t *testing.T) {
	h := startHTTP(t, WithWaitLimits(time.Second, time.Second))
	for i, body := range []string{`null`, `{}`, `{"sequence":null}`, `{"is_final":true}`} {
		id := fmt.Sprintf("zz_no_frame_%d", i)
		w := h.running(t, id)
		w.lastSeq = publishRaw(t, h.js, id, 0, "", []byte(body), 0)
		w.seq = 1
		w.complete("done")
		wantInvalidFrame(t, h, id, frameReads(1))
	}
}

// TestSequenceOutOfRange: sequences start at 0 and increase by one (spec
// §12.3). A first stored frame of sequence MaxInt64 (or 2^40, which no
// stream that has stored a few messages can have reached: each message
// holds at most e2a.MaxBurstFrames frames) was answered 410 frames_expired,
// as if the frames before it had aged out; a frame of a negative sequence
// was dropped as one before the resume point. Both break the frame
// contract: 502 invalid_frame, in every view.
func TestSequenceOutOfRange(t *testing.T) {
	h := startHTTP(t, WithWaitLimits(time.Second, time.Second))
	for i, c := range []struct {
		name   string
		before int // frames stored before it
		first  int64
		bodies []int64
	}{
		{"first MaxInt64", 0, math.MaxInt64, []int64{math.MaxInt64}},
		{"first 2^40", 0, 1 << 40, []int64{1 << 40}},
		{"first burst past MaxInt64", 0, math.MaxInt64, []int64{math.MaxInt64, math.MinInt64}},
		{"first -1", 0, -1, []int64{-1}},
		{"-1 after frame 0", 1, -1, []int64{-1}},
		{"burst -2, -1 after frame 0", 1, -2, []int64{-2, -1}},
	} {
		id := fmt.Sprintf("zz_seq_range_%d", i)
		w := h.running(t, id)
		for range c.before {
			w.text("a")
		}
		var frames [][]byte
		for _, seq := range c.bodies {
			frames = append(frames, w.frameAt(seq))
		}
		count := ""
		if len(frames) > 1 {
			count = fmt.Sprint(len(frames))
		}
		w.lastSeq = publishRaw(t, h.js, id, c.first, count, bytes.Join(frames, []byte("\n")), w.lastSeq)
		w.complete("done")
		// Resumed at the final frame, stored after it (a read resumed past
		// the final frame reads the last message only: 204, or 200 with
		// no frame).
		t.Run(c.name, func(t *testing.T) { wantInvalidFrame(t, h, id, frameReads(int64(c.before))) })
	}
}

// TestHeaderBodySequenceDisagree: a stored frame whose E2A-Sequence header
// (3) is not its own sequence (4) was invalid_frame only to a read that
// delivered it: a read resumed past its header's place skipped it, and the
// aggregated JSON, which takes the last frame's sequence from its body,
// answered ?from=4 and ?from=5 202 running. It is 502 invalid_frame to
// every read that meets it.
func TestHeaderBodySequenceDisagree(t *testing.T) {
	h := startHTTP(t, WithWaitLimits(time.Second, time.Second))
	const id = "zz_header_body"
	w := h.running(t, id)
	for range 3 {
		w.text("a")
	}
	publishRaw(t, h.js, id, 3, "", w.frameAt(4), w.lastSeq)
	wantInvalidFrame(t, h, id, append(frameReads(4), frameReads(5)[len(expiredReads):]...))
}

// TestHistoricFramesContract: the History's frames are checked as stored
// ones: one without a sequence, or of a negative one, is invalid_frame
// (it was frame 0, or skipped as a duplicate).
func TestHistoricFramesContract(t *testing.T) {
	w := &writer{t: t, env: newEnvelope("zz_historic_contract")}
	for _, bad := range [][]byte{[]byte(`{}`), []byte(`null`), w.frameAt(-1)} {
		h := HistoricRequest{Frames: []HistoricFrame{{Raw: bad}, {Raw: w.frameAt(0)}}}
		if _, err := h.frames("zz_historic_contract"); !errors.Is(err, ErrInvalidFrame) {
			t.Errorf("%s: %v, want %v", bad, err, ErrInvalidFrame)
		}
	}
}

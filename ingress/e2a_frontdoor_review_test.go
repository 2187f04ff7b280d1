package ingress_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// The E2A front door as an integrator writing a client from
// specs/e2a-protocol.md and docs/protocols.md ("E2A") meets it: raw HTTP
// against the whole pipeline (ingress, egress, the demo agent, real
// JetStream), for the edges the other E2A tests leave out.

// postView posts body to path (?wait=true) with hdr and decodes the
// request's JSON view; a status other than 200 fails the test.
func postView(t *testing.T, p *pipeline, path, body string, hdr ...string) egress.RequestView {
	t.Helper()
	resp, b := testkit.Do(t, http.MethodPost, p.url+path, body, hdr...)
	var v egress.RequestView
	if err := json.Unmarshal(b, &v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s (%v)", path, resp.StatusCode, b, err)
	}
	return v
}

// viewText is the text deltas of a view's frames, joined.
func viewText(t *testing.T, v egress.RequestView) string {
	t.Helper()
	var b strings.Builder
	for _, f := range mustFrames(t, v) {
		if c, err := f.Chunk(); err == nil && c.DeltaKind == "text" {
			s, _ := c.Delta.(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// checkFrames applies §12.3 to the frames one reader got: sequence 0, 1,
// 2, … and exactly one final frame, the last.
func checkFrames(t *testing.T, who string, frames []*e2a.Response) {
	t.Helper()
	for i, f := range frames {
		if f.Sequence != int64(i) || f.IsFinal != (i == len(frames)-1) {
			t.Fatalf("%s: frame %d has sequence %d, is_final %v; want sequence %d and only the last frame final (spec §12.3)",
				who, i, f.Sequence, f.IsFinal, i)
		}
	}
	if len(frames) == 0 {
		t.Fatalf("%s: no frame", who)
	}
}

// readNDJSONFrames reads an E2A NDJSON answer to its end (empty lines are
// heartbeats). It returns an error rather than failing the test: it runs
// beside the test's goroutine.
func readNDJSONFrames(r io.Reader) ([]*e2a.Response, error) {
	var frames []*e2a.Response
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		f, err := e2a.ResponseFromJSON(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	return frames, sc.Err()
}

// TestE2ATwoReadersOfOneStream: two clients read one request's stream at
// once, one as SSE, one as NDJSON, each opened while the request runs;
// each gets every frame, in order, the final one once (spec §12.3).
func TestE2ATwoReadersOfOneStream(t *testing.T) {
	p := startPipeline(t)
	r := p.post(t, "/v1/requests", "", `{"request_id":"two-readers-1","params":{"text":"hi","frames":6,"delay_ms":100}}`)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d", r.StatusCode)
	}
	sse := p.get(t, "/v1/requests/two-readers-1/stream")
	nd := p.get(t, "/v1/requests/two-readers-1/stream", "Accept", "application/x-ndjson")
	if sse.StatusCode != http.StatusOK || nd.StatusCode != http.StatusOK {
		t.Fatalf("streams: SSE %d, NDJSON %d", sse.StatusCode, nd.StatusCode)
	}
	type read struct {
		frames []*e2a.Response
		err    error
	}
	got := make(chan read, 1)
	go func() {
		f, err := readNDJSONFrames(nd.Body)
		got <- read{f, err}
	}()
	a := framesOf(t, readSSE(t, sse.Body))
	nr := testkit.Receive(t, got, 60*time.Second, "the NDJSON reader's frames")
	if nr.err != nil {
		t.Fatal(nr.err)
	}
	b := nr.frames
	checkFrames(t, "SSE reader", a)
	checkFrames(t, "NDJSON reader", b)
	if len(a) != len(b) {
		t.Fatalf("SSE reader got %d frames, NDJSON reader %d; want the same frames", len(a), len(b))
	}
	for i := range a {
		if a[i].ResponseID != b[i].ResponseID {
			t.Fatalf("frame %d: response_id %s (SSE) vs %s (NDJSON); want the same record", i, a[i].ResponseID, b[i].ResponseID)
		}
	}
}

// TestE2AUnknownEnvelopeFieldsAreDropped: a field the envelope does not
// define (§4) is neither refused nor passed on: the request is accepted
// and the stored envelope holds the known fields only (from_dict reads
// the dataclass's fields, §9), as docs/protocols.md says.
func TestE2AUnknownEnvelopeFieldsAreDropped(t *testing.T) {
	p := startPipeline(t)
	v := postView(t, p, "/v1/requests?wait=true",
		`{"request_id":"unknown-field-1","x_custom":{"a":1},"priority":5,"channel":"web","params":{"text":"hi","frames":1}}`)
	var env map[string]any
	if err := json.Unmarshal(v.Envelope, &env); err != nil {
		t.Fatal(err)
	}
	if _, ok := env["x_custom"]; ok || env["priority"] != nil {
		t.Fatalf("stored envelope %s keeps fields E2A does not define; want them dropped", v.Envelope)
	}
	if env["channel"] != "web" || v.State != egress.StateSucceeded {
		t.Fatalf("state %s, envelope %s; want the request run with its known fields", v.State, v.Envelope)
	}
}

// TestE2ARequestIDReusedWithOtherBody: the same principal posting a
// request_id again with another body gets the first request (duplicate,
// its frames), not a second run: the id is the request (docs/protocols.md:
// "The same request_id posted twice is one request").
func TestE2ARequestIDReusedWithOtherBody(t *testing.T) {
	p := startPipeline(t)
	first := postView(t, p, "/v1/requests?wait=true", `{"request_id":"reuse-1","params":{"text":"first","frames":1}}`)
	r, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests", `{"request_id":"reuse-1","params":{"text":"second","frames":1}}`)
	var acc struct {
		RequestID string `json:"request_id"`
		Duplicate bool   `json:"duplicate"`
	}
	if err := json.Unmarshal(b, &acc); err != nil || r.StatusCode != http.StatusAccepted || !acc.Duplicate || acc.RequestID != "reuse-1" {
		t.Fatalf("second POST: %d %s; want 202 duplicate", r.StatusCode, b)
	}
	again := postView(t, p, "/v1/requests?wait=true", `{"request_id":"reuse-1","params":{"text":"third","frames":1}}`)
	if got, want := viewText(t, again), viewText(t, first); got != want || !strings.Contains(want, "first") {
		t.Fatalf("a reused request_id answered %q; want the first request's %q", got, want)
	}
}

// TestE2AIdempotencyKeyAndBodyRequestID: an Idempotency-Key is the
// request id of a body without one, and yields to the body's request_id
// (docs/protocols.md: it "supplies the id when the body has none").
func TestE2AIdempotencyKeyAndBodyRequestID(t *testing.T) {
	p := startPipeline(t)
	for _, tc := range []struct{ body, want string }{
		{`{"params":{"text":"hi","frames":1}}`, "idem-key-1"},
		{`{"request_id":"idem-body-1","params":{"text":"hi","frames":1}}`, "idem-body-1"},
	} {
		v := postView(t, p, "/v1/requests?wait=true", tc.body, "Idempotency-Key", "idem-key-1")
		if v.RequestID != tc.want {
			t.Fatalf("%s with Idempotency-Key idem-key-1: request %q; want %q", tc.body, v.RequestID, tc.want)
		}
	}
}

// TestE2APostWaitFinalError: ?wait=true of a request that fails answers
// 200 (the request has ended) with state failed and, last, its one final
// e2a.error frame, status failed (§12.2), code and retryable as the agent
// wrote them.
func TestE2APostWaitFinalError(t *testing.T) {
	p := startPipeline(t)
	v := postView(t, p, "/v1/requests?wait=true", `{"request_id":"wait-fail-1","params":{"text":"hi","fail":"boom","fail_after":1}}`)
	if v.State != egress.StateFailed || len(v.Frames) != 2 {
		t.Fatalf("state %s, %d frames; want failed after 2 frames", v.State, len(v.Frames))
	}
	f := mustFrames(t, v)[1]
	body, err := f.Error()
	if err != nil || !f.IsFinal || f.Status != e2a.StatusFailed || f.ResponseKind != e2a.KindError || body.Code != "boom" || body.Retryable {
		t.Fatalf("final frame %s (%v); want a final e2a.error, status failed, code boom, not retryable", v.Frames[1], err)
	}
}

// TestE2ALowercaseRFC3339Times: "t" and "z" may be lower case in an RFC
// 3339 time (RFC 3339 §5.6, NOTE), the form spec §4.3 makes normative for
// timestamp (and the pipeline's deadline): such a request is accepted,
// its times stored in the canonical upper case every stage reads (the
// agent parses deadline with e2a.ParseTime), and its deadline enforced.
func TestE2ALowercaseRFC3339Times(t *testing.T) {
	p := startPipeline(t)
	v := postView(t, p, "/v1/requests?wait=true",
		`{"request_id":"lower-t-1","timestamp":"2026-03-28t12:00:00z","deadline":"2001-01-01t00:00:00.5z","params":{"text":"hi","frames":1}}`)
	var env e2a.Envelope
	if err := json.Unmarshal(v.Envelope, &env); err != nil {
		t.Fatal(err)
	}
	if env.Timestamp != "2026-03-28T12:00:00Z" || env.Deadline != "2001-01-01T00:00:00.5Z" {
		t.Fatalf("stored timestamp %q, deadline %q; want 2026-03-28T12:00:00Z and 2001-01-01T00:00:00.5Z", env.Timestamp, env.Deadline)
	}
	if code, _ := (pipetest.Answer{State: v.State, Frames: mustFrames(t, v)}).ErrorCode(); code != "deadline_exceeded" {
		t.Fatalf("state %s, final error %q; want the past deadline enforced (deadline_exceeded)", v.State, code)
	}
	v = postView(t, p, "/v1/requests?wait=true", `{"request_id":"lower-t-2","timestamp":"2026-03-28t14:00:00+02:00","params":{"text":"hi","frames":1}}`)
	if err := json.Unmarshal(v.Envelope, &env); err != nil || env.Timestamp != "2026-03-28T12:00:00+00:00" {
		t.Fatalf("stored timestamp %q (%v); want 2026-03-28T12:00:00+00:00 (converted to UTC, docs/protocols.md)", env.Timestamp, err)
	}
}

// mustFrames decodes a view's frames.
func mustFrames(t *testing.T, v egress.RequestView) []*e2a.Response {
	t.Helper()
	out := make([]*e2a.Response, 0, len(v.Frames))
	for _, raw := range v.Frames {
		f, err := e2a.ResponseFromJSON(raw)
		if err != nil {
			t.Fatalf("frame %s: %v", raw, err)
		}
		out = append(out, f)
	}
	return out
}

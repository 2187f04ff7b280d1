package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/idgen"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// propertySeed seeds the generated ids of TestRequestIDProperty; a failure
// prints it.
const propertySeed = 1313

// jsonString writes s as a JSON string literal byte for byte: only '"',
// '\' and control bytes are escaped, so invalid UTF-8 reaches the server
// as is (json.Marshal would replace it with U+FFFD).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestRequestIDProperty posts generated request ids (every Unicode general
// category, every white space and control character, invalid UTF-8,
// lengths 1..1025 bytes, plus idgen.EdgeCases) to the real pipeline
// (ingress, egress, the demo agent, embedded JetStream) and checks:
//
//   - accepted ⇔ subjects.ValidateRequestID accepts the id;
//   - refused ⇒ 400 invalid_request_id (invalid_request for a body that is
//     not UTF-8), not retryable, and nothing published;
//   - accepted ⇒ 202, not a duplicate, the link answers the same id with
//     frames 0..n that pass e2a.CheckFrames and end final; the stored
//     request's Nats-Msg-Id and E2A-Request-Id and every frame's
//     E2A-Request-Id read back byte for byte (frames carry no Nats-Msg-Id);
//   - distinct accepted ids are independent: E2A_REQUESTS holds exactly one
//     message per accepted id.
func TestRequestIDProperty(t *testing.T) {
	p := startPipeline(t)
	ctx := context.Background()
	reqs, err := p.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		t.Helper()
		info, err := reqs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	var ids []string
	seen := map[string]bool{}
	for _, id := range append(idgen.EdgeCases(), idgen.Generate(propertySeed, 300)...) {
		// "" is an absent request_id (a fresh id is generated): not a case.
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	type acceptedID struct{ id, self string }
	var accepted []acceptedID
	refused := 0
	for _, id := range ids {
		before := stored()
		resp, body := do(t, "POST", p.url+"/v1/requests", `{"request_id":`+jsonString(id)+`,"params":{"text":"x","frames":1}}`)
		valid := subjects.ValidateRequestID(id) == nil
		if !valid {
			var eb ingress.ErrorBody
			_ = json.Unmarshal(body, &eb)
			want := "invalid_request_id"
			if !utf8.ValidString(id) {
				want = "invalid_request" // the body itself is not UTF-8: a parse error
			}
			if resp.StatusCode != http.StatusBadRequest || eb.Error.Code != want || eb.Error.Retryable {
				t.Fatalf("seed %d: id %+q: %d %s, want 400 %s", propertySeed, id, resp.StatusCode, body, want)
			}
			if after := stored(); after != before {
				t.Fatalf("seed %d: refused id %+q published (%d → %d messages)", propertySeed, id, before, after)
			}
			refused++
			continue
		}
		var acc ingress.AcceptedBody
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.RequestID != id || acc.Duplicate {
			t.Fatalf("seed %d: id %+q: %d %s, want 202 for that id, not a duplicate", propertySeed, id, resp.StatusCode, body)
		}
		accepted = append(accepted, acceptedID{id, acc.Links["self"]})
	}
	if n := stored(); n != uint64(len(accepted)) {
		t.Fatalf("seed %d: E2A_REQUESTS holds %d messages for %d accepted ids", propertySeed, n, len(accepted))
	}

	// Every accepted request finishes, at its own link, with its own frames.
	work := make(chan acceptedID)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	fail := func(format string, a ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				checkAcceptedID(p, a.id, a.self, fail)
			}
		}()
	}
	for _, a := range accepted {
		work <- a
	}
	close(work)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("seed %d: %d of %d accepted ids failed; first: %s", propertySeed, len(failures), len(accepted), failures[0])
	}
	t.Logf("seed %d: %d distinct ids posted, %d accepted and finished, %d refused with nothing published", propertySeed, len(ids), len(accepted), refused)
}

// checkAcceptedID waits for the request at link self and checks its frames
// and the headers the pipeline stored for it.
func checkAcceptedID(p *pipeline, id, self string, fail func(string, ...any)) {
	resp, err := http.Get(p.url + self + "?wait=true")
	if err != nil {
		fail("id %+q: %v", id, err)
		return
	}
	defer resp.Body.Close()
	var got struct {
		RequestID string          `json:"request_id"`
		Frames    []*e2a.Response `json:"frames"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil {
		fail("id %+q: GET %s: %d", id, self, resp.StatusCode)
		return
	}
	if got.RequestID != id || len(got.Frames) == 0 || !got.Frames[len(got.Frames)-1].IsFinal {
		fail("id %+q: answered %+q with %d frames", id, got.RequestID, len(got.Frames))
		return
	}
	if err := e2a.CheckFrames(got.Frames); err != nil {
		fail("id %+q: %v", id, err)
		return
	}
	for _, f := range got.Frames {
		if f.RequestID != id {
			fail("id %+q: frame %d names %+q", id, f.Sequence, f.RequestID)
			return
		}
	}
	ctx := context.Background()
	rs, _ := subjects.Request("demo", id)
	reqs, err := p.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		fail("%v", err)
		return
	}
	m, err := reqs.GetLastMsgForSubject(ctx, rs)
	if err != nil {
		fail("id %+q: stored request: %v", id, err)
		return
	}
	// No Nats-Msg-Id: a front door keeps a chosen id to one request by the
	// publish's expected last subject sequence, so the dedupe window holds
	// no entry of it (ingress.idCheck).
	if a, b := m.Header.Get(subjects.HeaderMsgID), m.Header.Get(subjects.HeaderRequestID); a != "" || b != id {
		fail("id %+q: request headers Nats-Msg-Id %+q (want none), E2A-Request-Id %+q", id, a, b)
		return
	}
	fs, _ := subjects.Response(id)
	msgs, err := streams.DirectGetAll(ctx, p.nc, streams.ResponsesStream, fs, 0, 256)
	stored := 0
	for _, m := range msgs {
		n, cerr := e2a.BurstCount(m.Header.Get(subjects.HeaderFrames))
		err = errors.Join(err, cerr)
		stored += n // a message holds one frame or a burst
	}
	if err != nil || stored != len(got.Frames) {
		fail("id %+q: %d stored frames, %v", id, stored, err)
		return
	}
	for i, f := range msgs {
		if a, b := f.Header.Get(subjects.HeaderMsgID), f.Header.Get(subjects.HeaderRequestID); a != "" || b != id {
			fail("id %+q: frame %d headers Nats-Msg-Id %+q, E2A-Request-Id %+q", id, i, a, b)
			return
		}
	}
}

// TestInvalidIDsAndUTF8EveryEndpoint: every endpoint refuses an id outside
// the grammar with its protocol's invalid-params error, and a body that is
// not valid UTF-8 with its parse error, before anything is published.
func TestInvalidIDsAndUTF8EveryEndpoint(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})))
	const bad = "\xff" // the one invalid id an HTTP header can carry (net/http refuses control bytes)
	const wf = `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"wait\",\"operation\":{\"Wait\":{\"duration\":1}}}\n{\"type\":\"beginExecution\",\"executionId\":\"exec-1\",\"operationOrder\":[\"wait\"]}"}`
	a2aSend := func(extra string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1",` + extra + `"parts":[{"kind":"text","text":"hi"}]}}}`
	}
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		status           int
		want             []string // substrings of the answer
	}{
		{"e2a body request_id", "/v1/requests", `{"request_id":"\r\r","params":{}}`, nil, 400, []string{`"code":"invalid_request_id"`, `"retryable":false`}},
		{"e2a outer space", "/v1/requests", `{"request_id":"dup ","params":{}}`, nil, 400, []string{`"code":"invalid_request_id"`}},
		{"e2a Idempotency-Key", "/v1/requests", `{"params":{}}`, []string{"Idempotency-Key", bad}, 400, []string{`"code":"invalid_request_id"`}},
		{"e2a invalid UTF-8", "/v1/requests", `{"params":{"text":"` + bad + `"}}`, nil, 400, []string{`"code":"invalid_request"`, "not valid UTF-8"}},
		{"a2a taskId", "/a2a", a2aSend(`"taskId":"\t",`), nil, 200, []string{`"code":-32602`, `"id":7`}},
		{"a2a contextId", "/a2a", a2aSend(`"contextId":"c\u200b",`), nil, 200, []string{`"code":-32602`}},
		{"a2a tasks/get", "/a2a", `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":" t"}}`, nil, 200, []string{`"code":-32602`}},
		{"a2a Idempotency-Key", "/a2a", a2aSend(""), []string{"Idempotency-Key", bad}, 200, []string{`"code":-32602`}},
		{"a2a invalid UTF-8", "/a2a", a2aSend(`"contextId":"` + bad + `",`), nil, 200, []string{`"code":-32700`, "not valid UTF-8"}},
		{"agentvault id", "/a2a", `{"jsonrpc":"2.0","id":9,"method":"tasks/send","params":{"id":"x\n","message":{"role":"user","parts":[{"type":"text","content":"hi"}]}}}`, nil, 200, []string{`"code":-32602`}},
		{"acp sessionId", "/acp", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s\u2028","prompt":[{"type":"text","text":"hi"}]}}`, nil, 200, []string{`"code":-32602`}},
		{"acp invalid UTF-8", "/acp", `{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/` + bad + `","mcpServers":[]}}`, nil, 200, []string{`"code":-32700`}},
		{"a2e Idempotency-Key", "/a2e", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"hi"}`, []string{"Idempotency-Key", bad}, 200, []string{`"code":"invalid_params"`, `"retryable":false`, `"req_id":"r-42"`}},
		{"a2e invalid UTF-8", "/a2e", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"` + bad + `"}`, nil, 400, []string{`"code":"parse_error"`, "not valid UTF-8"}},
		{"workflow Idempotency-Key", "/api/v1/workflows/execute", wf, []string{"Idempotency-Key", bad}, 400, []string{"ValidationError", "invalid request id"}},
		{"workflow invalid UTF-8", "/api/v1/workflows/execute", strings.Replace(wf, "exec-1", "exec-"+bad, 1), nil, 400, []string{"ValidationError", "not valid UTF-8"}},
	} {
		before := streamMsgs(t, js, streams.RequestsStream)
		resp, body := do(t, "POST", url+tc.path, tc.body, tc.hdr...)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.status, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s: answer lacks %s: %s", tc.name, w, body)
			}
		}
		if after := streamMsgs(t, js, streams.RequestsStream); after != before {
			t.Errorf("%s: published (%d → %d)", tc.name, before, after)
		}
	}
}

// TestE2ADuplicateNamesTheStoredPool: a retry of an accepted request (the
// same request_id or Idempotency-Key) answers "duplicate": the request
// already accepted, which nothing republishes. When the retry names another
// pool (?agent=, /pools/<pool>/v1/requests), the answer's "pool" is the
// stored request's (Server.duplicate), not the retry's, where nothing was
// published and no worker of it will ever see the request.
func TestE2ADuplicateNamesTheStoredPool(t *testing.T) {
	p := pipetest.Start(t)
	resp, b := do(t, "POST", p.URL+"/v1/requests?agent=pool-a", `{"request_id":"dup-pool-1","params":{"text":"hi"}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first POST: %d %s", resp.StatusCode, b)
	}
	for _, tc := range []struct {
		what, path, body string
		hdr              []string
	}{
		{"same request_id, ?agent=pool-b", "/v1/requests?agent=pool-b", `{"request_id":"dup-pool-1","params":{"text":"hi"}}`, nil},
		{"Idempotency-Key, /pools/pool-b/", "/pools/pool-b/v1/requests", `{"params":{"text":"hi"}}`, []string{"Idempotency-Key", "dup-pool-1"}},
	} {
		resp, b := do(t, "POST", p.URL+tc.path, tc.body, tc.hdr...)
		if resp.StatusCode != http.StatusAccepted {
			continue // refused: no misreport
		}
		var acc ingress.AcceptedBody
		if err := json.Unmarshal(b, &acc); err != nil {
			t.Fatal(err)
		}
		if acc.Duplicate && acc.Pool != "pool-a" {
			t.Errorf("retry (%s): 202 %s; the request is queued in pool-a alone: a duplicate's answer must name pool-a "+
				"(or the retry be refused), not %q, where nothing was published", tc.what, bytes.TrimSpace(b), acc.Pool)
		}
	}
}

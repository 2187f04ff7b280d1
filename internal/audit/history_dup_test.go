package audit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// secretFrame is frame seq of id, of user's request, with text as its
// chunk, or, when final, a complete frame whose result is text.
func secretFrame(t *testing.T, id, user string, seq int64, final bool, text string) []byte {
	t.Helper()
	r := e2a.ResponseFor(&e2a.Envelope{RequestID: id, UserID: user})
	r.ResponseID = id + "-" + text
	r.Sequence = seq
	r.Timestamp = e2a.Now()
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	if final {
		r.IsFinal, r.Status, r.ResponseKind = true, e2a.StatusSucceeded, e2a.KindComplete
		r.Body = e2a.MarshalBody(e2a.CompleteBody{Result: map[string]any{"content": text}})
	} else {
		r.Status, r.ResponseKind = e2a.StatusInProgress, e2a.KindChunk
		r.Body = e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text})
	}
	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// alicesRequest starts a server, an Auditor and the read API over it, and
// stores a request of alice's (a UUIDv7 id) in E2A_REQUESTS.
func alicesRequest(t *testing.T) (jetstream.JetStream, *nats.Conn, *httptest.Server, string) {
	t.Helper()
	js, nc, _, srv := historyServer(t)
	id := uuid.Must(uuid.NewV7()).String()
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "alice"})
	return js, nc, srv, id
}

// A stored duplicate frame (the same sequence stored twice) is skipped by
// the hot streams' reader, which answers the request whole; the history,
// which holds the same messages, answers it byte for byte as the hot
// streams did (it refused it as an invalid frame before).
func TestHistoryDuplicateFrameAnswersAsTheHotStreams(t *testing.T) {
	js, _, srv, id := alicesRequest(t)
	publishFrame(t, js, id, 0, frame(id, 0, false))
	publishFrame(t, js, id, 1, frame(id, 1, false))
	// Frame 1 stored again (a republish past the dedupe window).
	publishFrameRaw(t, js, id, "1", subjects.FrameMsgID(id, 1)+"-again", frame(id, 1, false))
	publishFrame(t, js, id, 2, frame(id, 2, true))
	reads := []struct{ path, accept string }{{"", ""}, {"?wait=true", ""}, {"/stream", ""}, {"/stream", "application/x-ndjson"}}
	hot := map[string]string{}
	for _, r := range reads {
		var hdr []string
		if r.accept != "" {
			hdr = []string{"Accept", r.accept}
		}
		got := getAnswer(t, srv.URL+"/v1/requests/"+id+r.path, "alice", hdr...)
		if r.path == "" && got.Status != http.StatusOK {
			t.Fatalf("hot json: %+v", got)
		}
		hot[r.path+" "+r.accept] = got.Body
	}
	waitAudit(t, js, 5)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	for _, r := range reads {
		var hdr []string
		if r.accept != "" {
			hdr = []string{"Accept", r.accept}
		}
		got := getAnswer(t, srv.URL+"/v1/requests/"+id+r.path, "alice", hdr...)
		if got.Body != hot[r.path+" "+r.accept] {
			t.Errorf("%s %s from the history: %d %.400s\nfrom the hot streams: %.400s", r.path, r.accept, got.Status, got.Body, hot[r.path+" "+r.accept])
		}
	}
}

// A request id taken again by another principal once the first request
// left the hot streams (ingress refuses it only while they hold it): the
// history holds alice's envelope, then bob's envelope and frames under the
// same id. Alice's reads of her id answer her request (no frame: no worker
// took it), never bob's frames; those name bob's user_id.
func TestHistoryReusedIDKeepsAnotherPrincipalsFramesOut(t *testing.T) {
	js, nc, srv, id := alicesRequest(t)
	waitAudit(t, js, 1)
	natstest.Purge(t, js, streams.RequestsStream)
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "bob"},
		subjects.HeaderMsgID, id+"-bob")
	natstest.PublishBurst(t, nc, id, 0, 0, secretFrame(t, id, "bob", 0, false, "bob-secret-chunk"), secretFrame(t, id, "bob", 1, true, "bob-secret-result"))
	waitAudit(t, js, 3)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	for _, p := range []string{"", "/stream", "?wait=true"} {
		got := getAnswer(t, srv.URL+"/v1/requests/"+id+p, "alice")
		if strings.Contains(got.Body, "bob-secret") || !strings.Contains(got.Body, id) {
			t.Errorf("alice's GET %s of her id: %d %.300s, want her request without bob's frames", p, got.Status, got.Body)
		}
	}
}

// takeID stores bob's request under id, which the hot streams no longer
// hold (alice's aged out): its envelope and its first chunk, running, or
// with final its final frame too.
func takeID(t *testing.T, js jetstream.JetStream, nc *nats.Conn, id string, final bool) {
	t.Helper()
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "bob"},
		subjects.HeaderMsgID, id+"-bob")
	frames := [][]byte{secretFrame(t, id, "bob", 0, false, "bob-secret-chunk")}
	if final {
		frames = append(frames, secretFrame(t, id, "bob", 1, true, "bob-secret-result"))
	}
	natstest.PublishBurst(t, nc, id, 0, 0, frames...)
}

// alicesAgedOut is alicesRequest with its first frame, once the hot
// streams dropped both (copied into E2A_AUDIT).
func alicesAgedOut(t *testing.T) (jetstream.JetStream, *nats.Conn, *httptest.Server, string) {
	t.Helper()
	js, nc, srv, id := alicesRequest(t)
	publishFrame(t, js, id, 0, frame(id, 0, false))
	waitAudit(t, js, 2)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	return js, nc, srv, id
}

// A request id taken again by bob once alice's request left the hot
// streams: while bob's request is hot, alice's reads of her id are
// answered from the history, exactly as the hot streams answered them
// (they were the 404 of an unknown id: the hot envelope, bob's, decided,
// though the history held hers), and bob reads his own.
func TestReusedIDHotAnswersTheFirstOwnerFromTheHistory(t *testing.T) {
	t.Parallel()
	js, nc, _, srv := historyServer(t)
	id := storeOwned(t, js, nc, false)
	hot := hotAnswers(t, srv, []string{id})
	waitAudit(t, js, 5)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	takeID(t, js, nc, id, false)
	for _, c := range testkit.ReadAPIReads {
		if got, want := getAnswer(t, srv.URL+"/v1/requests/"+id+c.Path, "alice", c.Hdr...), hot[id+" "+c.Name]; got != want {
			t.Errorf("%s as alice, her id taken by bob: %+v\nwant her request as the hot streams answered it: %+v", c.Name, got, want)
		}
	}
	if got := getAnswer(t, srv.URL+"/v1/requests/"+id, "bob"); got.Status != http.StatusAccepted || !strings.Contains(got.Body, "bob-secret-chunk") {
		t.Errorf("bob's read of his running request: %+v", got)
	}
}

// The same with alice's copy holding no final frame (no worker answered
// her): her reads end as one whose wait ran out, as without bob's request
// (TestHistoryWithoutFinalFrame), and never follow the hot frames, which
// are bob's.
func TestReusedIDHotFramesNotFollowedFromTheFirstOwnersCopy(t *testing.T) {
	t.Parallel()
	js, nc, srv, id := alicesAgedOut(t)
	takeID(t, js, nc, id, false)
	for _, p := range []string{"", "?wait=true", "/stream"} {
		got := getAnswer(t, srv.URL+"/v1/requests/"+id+p, "alice")
		want := http.StatusOK
		switch p {
		case "":
			want = http.StatusAccepted
		case "?wait=true":
			want = http.StatusGatewayTimeout
		}
		if strings.Contains(got.Body, "bob-secret") || got.Status != want || !strings.Contains(got.Body, id) {
			t.Errorf("alice's GET %s of her id taken by bob: %d %.400s, want %d, her request without bob's frames", p, got.Status, got.Body, want)
		}
		if p == "/stream" && !strings.Contains(got.Body, `"code":"`+egress.CodeTimeout+`"`) {
			t.Errorf("alice's stream: %.400s, want it to end as one whose wait ran out", got.Body)
		}
	}
}

// e2a replay <id> of an id bob took again once alice's request left the
// hot streams, once both left them: alice's envelope (the first in the
// id's window) is reported with her frames only. Bob's frames, read after
// her copy up to a final frame, were reported as hers (sequences 0 and 1
// again after her frame 0: bob's answer under alice's request).
func TestReplayReusedIDReportsTheEnvelopesOwnFrames(t *testing.T) {
	t.Parallel()
	js, nc, _, id := alicesAgedOut(t)
	takeID(t, js, nc, id, true)
	waitAudit(t, js, 4)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var frames []string
	if _, err := a.Replay(testCtx(t), audit.Query{RequestIDs: []string{id}}, func(r audit.Record) error {
		b, err := json.Marshal(r)
		if r.Kind == audit.KindRequest && !strings.Contains(string(b), `alice`) {
			t.Errorf("the request reported: %s, want alice's", b)
		}
		if r.Kind == audit.KindFrame {
			frames = append(frames, string(b))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1 || strings.Contains(frames[0], "bob") {
		t.Errorf("the frames reported of alice's request: %q, want her frame 0 alone", frames)
	}
}

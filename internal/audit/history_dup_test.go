package audit_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// secretFrame is frame seq of id with text as its chunk, or, when final,
// a complete frame whose result is text.
func secretFrame(t *testing.T, id string, seq int64, final bool, text string) []byte {
	t.Helper()
	r := e2a.ResponseFor(&e2a.Envelope{RequestID: id})
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

// A stored duplicate frame (the same sequence stored twice) is skipped by
// the hot streams' reader, which answers the request whole; the history,
// which holds the same messages, answers it byte for byte as the hot
// streams did (it refused it as an invalid frame before).
func TestHistoryDuplicateFrameAnswersAsTheHotStreams(t *testing.T) {
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	srv := readAPI(t, nc, a)
	id := uuid.Must(uuid.NewV7()).String()
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "alice"})
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

package audit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// readAPI serves egress's E2A read API on nc with the Auditor a as its
// history; the principal is the X-User header: alice and bob own their
// requests, ops sees every request (tenant.RoleAudit).
func readAPI(t *testing.T, nc *nats.Conn, a *audit.Auditor) *httptest.Server {
	t.Helper()
	return pipetest.ServeHistory(t, nc, a, egress.WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
		switch u := r.Header.Get("X-User"); u {
		case "alice", "bob":
			return tenant.Principal{ID: u}, nil
		case "ops":
			return tenant.Principal{ID: u, Roles: []tenant.Role{tenant.RoleAudit}}, nil
		}
		return tenant.Principal{}, errors.New("who?")
	}))
}

// historyServer starts a server, an Auditor on it and the read API with
// the Auditor as its history (readAPI).
func historyServer(t *testing.T) (jetstream.JetStream, *nats.Conn, *audit.Auditor, *httptest.Server) {
	t.Helper()
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, nc, a, readAPI(t, nc, a)
}

// getAnswer is a read of the read API as user.
func getAnswer(t *testing.T, url, user string, hdr ...string) testkit.Answer {
	t.Helper()
	return testkit.Get(t, url, append([]string{"X-User", user}, hdr...)...)
}

// storeOwned stores a finished request of alice's: a UUIDv7 with three
// chunks and a final frame each one message, or with burst, the same
// frames in two bursts. It returns the id.
func storeOwned(t *testing.T, js jetstream.JetStream, nc *nats.Conn, burst bool) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	env := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "alice",
		Params: map[string]any{"text": "history"}}
	if !burst {
		completeRequest(t, js, "demo", env, 3)
		return id
	}
	natstest.PublishRequest(t, js, "demo", env)
	seq := natstest.PublishBurst(t, nc, id, 0, 0, frame(id, 0, false), frame(id, 1, false))
	natstest.PublishBurst(t, nc, id, 2, seq, frame(id, 2, false), frame(id, 3, true))
	return id
}

// hotAnswers reads every testkit.ReadAPIReads of each id as alice while
// the hot streams hold them.
func hotAnswers(t *testing.T, srv *httptest.Server, ids []string) map[string]testkit.Answer {
	t.Helper()
	hot := map[string]testkit.Answer{}
	for _, id := range ids {
		for _, c := range testkit.ReadAPIReads {
			a := getAnswer(t, srv.URL+"/v1/requests/"+id+c.Path, "alice", c.Hdr...)
			if c.Name == "json" && (a.Status != 200 || a.ContentType != "application/json") {
				t.Fatalf("%s from the hot streams: %+v", id, a)
			}
			hot[id+" "+c.Name] = a
		}
	}
	return hot
}

// checkFromHistory reads every testkit.ReadAPIReads of each id again once
// the hot streams dropped them: alice and ops get the hot streams' answers,
// byte for byte; bob gets the 404 of an unknown id.
func checkFromHistory(t *testing.T, srv *httptest.Server, ids []string, hot map[string]testkit.Answer) {
	t.Helper()
	unknown := getAnswer(t, srv.URL+"/v1/requests/"+uuid.Must(uuid.NewV7()).String(), "alice")
	if unknown.Status != http.StatusNotFound {
		t.Fatalf("unknown id: %+v", unknown)
	}
	for _, id := range ids {
		for _, c := range testkit.ReadAPIReads {
			want := hot[id+" "+c.Name]
			for _, user := range []string{"alice", "ops"} {
				if got := getAnswer(t, srv.URL+"/v1/requests/"+id+c.Path, user, c.Hdr...); got != want {
					t.Errorf("%s %s as %s: from the history\n%+v\nfrom the hot streams\n%+v", id, c.Name, user, got, want)
				}
			}
			if got := getAnswer(t, srv.URL+"/v1/requests/"+id+c.Path, "bob", c.Hdr...); got != unknown {
				t.Errorf("%s %s as bob: %+v, want the unknown id's %+v", id, c.Name, got, unknown)
			}
		}
	}
}

// TestReadAPIFromTheAuditHistory: requests the hot streams dropped (a
// purge, as their max age would) are answered by GET /v1/requests/{id}
// and /stream from E2A_AUDIT (Auditor.Request as the Service's History)
// exactly as the hot streams answered them, bursts included, to their
// owner and to an auditor; another principal gets 404, and so does a
// client's own id (no time to search from: not looked up).
func TestReadAPIFromTheAuditHistory(t *testing.T) {
	t.Parallel()
	js, nc, a, srv := historyServer(t)
	ids := []string{storeOwned(t, js, nc, false), storeOwned(t, js, nc, true)}
	client := "client-chosen-history"
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: client, Method: "chat", UserID: "alice"}, 1)
	hot := hotAnswers(t, srv, ids)
	if a := getAnswer(t, srv.URL+"/v1/requests/"+client, "alice"); a.Status != 200 {
		t.Fatalf("%s from the hot streams: %+v", client, a)
	}
	waitAudit(t, js, 5+3+3)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	checkFromHistory(t, srv, ids, hot)
	for _, user := range []string{"alice", "ops"} {
		if a := getAnswer(t, srv.URL+"/v1/requests/"+client, user); a.Status != http.StatusNotFound {
			t.Errorf("%s (no time in the id) as %s: %+v, want 404", client, user, a)
		}
	}
	// The Auditor's own answer: not found for an id without time or not
	// in the history, the envelope and the frames (bursts split) else.
	for _, id := range []string{client, uuid.Must(uuid.NewV7()).String()} {
		if _, err := a.Request(testCtx(t), id); !errors.Is(err, egress.ErrNotFound) {
			t.Errorf("Request(%s): %v, want not found", id, err)
		}
	}
	h, err := a.Request(testCtx(t), ids[1])
	if err != nil || len(h.Frames) != 4 || h.Frames[0].StreamSeq == 0 || h.Frames[0].StreamSeq != h.Frames[1].StreamSeq {
		t.Fatalf("Request(%s): %d frames, %v", ids[1], len(h.Frames), err)
	}
	for i, hf := range h.Frames {
		if f, err := e2a.ResponseFromJSON(hf.Raw); err != nil || f.Sequence != int64(i) || f.IsFinal != (i == 3) {
			t.Errorf("Request(%s) frame %d: %s (%v), want sequence %d, final %v", ids[1], i, hf.Raw, err, i, i == 3)
		}
	}
}

// TestReadAPIFromTheArchive: the same when E2A_AUDIT dropped the requests
// too (its byte limit) and only the archive holds them.
func TestReadAPIFromTheArchive(t *testing.T) {
	t.Parallel()
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 96 << 10
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, archive.WithFlushInterval(20*time.Millisecond), archive.WithBatchBytes(8<<10))
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	srv := readAPI(t, nc, a)
	ids := []string{storeOwned(t, js, nc, false), storeOwned(t, js, nc, true)}
	hot := hotAnswers(t, srv, ids)
	waitAudit(t, js, 5+3)
	oldLast := auditState(t, js).LastSeq
	natstest.WaitArchived(t, nc, oldLast)
	for i := 0; auditState(t, js).FirstSeq <= oldLast; i++ {
		if i > 2000 {
			t.Fatal("E2A_AUDIT never dropped the old requests")
		}
		completeRequest(t, js, "demo", &e2a.Envelope{RequestID: uuid.Must(uuid.NewV7()).String(), Method: "chat", UserID: "bob"}, 3)
	}
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	checkFromHistory(t, srv, ids, hot)
}

package audit_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// v7At returns a UUIDv7 whose time is t.
func v7At(t time.Time) string {
	u := uuid.Must(uuid.NewV7())
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[:6], ms[2:])
	return u.String()
}

// finalFrameMsg is request rid's only frame, its final one, as the agent
// runtime stores it.
func finalFrameMsg(rid string) *nats.Msg {
	fsubj, _ := subjects.Response(rid)
	f := nats.NewMsg(fsubj)
	f.Data = natstest.Frame(rid, 0, true)
	f.Header.Set(subjects.HeaderRequestID, rid)
	f.Header.Set(subjects.HeaderSequence, "0")
	return f
}

// storeOld stores n complete requests (an envelope and a final frame each)
// whose ids come from id, in chunks, each chunk aged out of the hot
// streams (purged) once E2A_AUDIT holds it: the store of a long history.
func storeOld(t *testing.T, js jetstream.JetStream, n int, id func(i int) string, settle func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const chunk = 20_000
	var stored uint64
	var block []*nats.Msg
	complete := func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal("publishes not acknowledged")
		}
	}
	for from := 0; from < n; from += chunk {
		for i := from; i < min(n, from+chunk); i++ {
			rid := id(i)
			env, _ := json.Marshal(&e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: rid, Method: "chat.send",
				UserID: "alice", Params: map[string]any{"text": "what is the weather in London tomorrow? " + strconv.Itoa(i)}})
			rsubj, _ := subjects.Request("demo", rid)
			f := finalFrameMsg(rid)
			if _, err := js.PublishAsync(rsubj, env); err != nil {
				t.Fatal(err)
			}
			block = append(block, f)
			if i%1000 == 999 || i == n-1 {
				// A block's frames follow its requests' copies in
				// E2A_AUDIT, as a request's answer follows the request:
				// the two sources' copies are not ordered otherwise, and
				// a burst lets one trail the other by more than the
				// test's 20 ms margin.
				complete()
				stored += uint64(len(block))
				waitAuditCtx(t, ctx, js, stored)
				for _, f := range block {
					if _, err := js.PublishMsgAsync(f); err != nil {
						t.Fatal(err)
					}
				}
				complete()
				stored += uint64(len(block))
				block = block[:0]
				if settle != nil {
					waitAuditCtx(t, ctx, js, stored)
					settle(ctx)
				}
			}
		}
		waitAuditCtx(t, ctx, js, stored)
		natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	}
}

func waitAuditCtx(t *testing.T, ctx context.Context, js jetstream.JetStream, n uint64) {
	t.Helper()
	testkit.Eventually(t, 5*time.Minute, fmt.Sprintf("E2A_AUDIT to reach %d messages", n), func() bool {
		s, err := js.Stream(ctx, streams.AuditStream)
		return err == nil && s.CachedInfo().State.LastSeq >= n
	})
}

// TestReplayOldRequestByIDTime: a request older than the hot retention,
// in a long audit history, is replayed from E2A_AUDIT from the time its
// UUIDv7 id carries (a binary search on the audit's store times, then its
// partition over the clock margin), not by scanning the history: the id is
// the index, nothing is stored per request for it. A client's own id (no
// time) is still found, by the scan, and so is a UUIDv7 whose clock ran
// ahead of the stream's (the hint finds nothing, the scan follows). What
// each replay reads is counted as the messages its connection receives.
// E2A_AUDIT_STORE_REQUESTS sets the history's size (default 40,000;
// docs/capacity.md quotes a million), E2A_AUDIT_CLOCK_MARGIN the margin.
// The same tests a history held by the archive (archivedServer).
func TestReplayOldRequestByIDTime(t *testing.T) { replayOldRequests(t, false) }

// TestReplayOldRequestFromTheArchive is the same with E2A_AUDIT bounded to
// a few MiB and an archiver running: the old requests are found in the
// archive (E2A_AUDIT keeps only the newest), through the same searches.
func TestReplayOldRequestFromTheArchive(t *testing.T) { replayOldRequests(t, true) }

func replayOldRequests(t *testing.T, archived bool) {
	n := 40_000
	if v := os.Getenv("E2A_AUDIT_STORE_REQUESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("E2A_AUDIT_STORE_REQUESTS=%q", v)
		}
	}
	js, nc := server(t)
	var settle func(context.Context)
	if archived {
		js, nc, settle = archivedServer(t)
	}
	anc, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(anc.Close) // after timeReadAPI's Service
	// One machine's clock: the margin can be short
	// (E2A_AUDIT_CLOCK_MARGIN sets it, e.g. to the default 1m).
	margin := 20 * time.Millisecond
	if v := os.Getenv("E2A_AUDIT_CLOCK_MARGIN"); v != "" {
		if margin, err = time.ParseDuration(v); err != nil {
			t.Fatalf("E2A_AUDIT_CLOCK_MARGIN=%q", v)
		}
	}
	a, err := audit.New(anc, audit.WithClockMargin(margin))
	if err != nil {
		t.Fatal(err)
	}
	clientID := "client-chosen-1"
	ahead := v7At(time.Now().Add(10 * time.Minute))
	ids := make([]string, n)
	start := time.Now()
	storeOld(t, js, n, func(i int) string {
		switch i {
		case n - 2:
			ids[i] = clientID
		case n - 3:
			ids[i] = ahead
		default:
			ids[i] = uuid.Must(uuid.NewV7()).String()
		}
		return ids[i]
	}, settle)
	t.Logf("stored %d requests in E2A_AUDIT (hot streams purged) in %v", n, time.Since(start).Round(time.Millisecond))
	if first := auditState(t, js).FirstSeq; archived && first <= uint64(2*(n/3)+2) {
		t.Fatalf("E2A_AUDIT still holds the request a third in (its first message is %d): the archive is not read", first)
	}
	read := map[string]uint64{}
	for _, c := range []struct{ name, id string }{
		{"UUIDv7, a third in, from its time", ids[n/3]},
		{"UUIDv7, newest, from its time", ids[n-1]},
		{"client's id, newest but 2, by scan", clientID},
		{"UUIDv7 ahead of the clock, hint then scan", ahead},
	} {
		before := anc.Stats().InMsgs
		t0 := time.Now()
		recs, st := collect(t, a, audit.Query{RequestIDs: []string{c.id}})
		took := time.Since(t0)
		read[c.name] = anc.Stats().InMsgs - before
		sum := summaries(recs)[c.id]
		if st.Requests != 1 || sum == nil || sum.State != audit.StateComplete || !sum.RequestFound || !sum.OK() {
			t.Fatalf("%s %s: %+v %+v", c.name, c.id, st, sum)
		}
		t.Logf("%-45s %8.1f ms, %7d messages read (%d requests in the history)", c.name, float64(took)/float64(time.Millisecond), read[c.name], n)
	}
	timeReadAPI(t, anc, a, n, []readAPICase{
		{"UUIDv7, a third in, from its time", ids[n/3], http.StatusOK},
		{"UUIDv7, newest, from its time", ids[n-1], http.StatusOK},
		{"client's id: not looked up", clientID, http.StatusNotFound},
		{"UUIDv7 ahead of the clock: windows only", ahead, http.StatusNotFound},
		{"UUIDv7 never stored, a third in: a miss", missAt(t, ids[n/3]), http.StatusNotFound},
	})
	if archived {
		// The archive is read a batch (hundreds of messages) at a time:
		// the counts below are E2A_AUDIT's.
		return
	}
	// The scan reads the partition's requests up to the one it looks for:
	// about n/16 of them, as many as the ids' hashes put in that partition
	// (2,492 of 40,000 in one CI run), so the bound is half of that; the
	// hint reads its margin's worth.
	scan := read["client's id, newest but 2, by scan"]
	if scan < uint64(n/32) {
		t.Errorf("the scan read %d messages of a history of %d requests", scan, n)
	}
	for _, name := range []string{"UUIDv7, a third in, from its time", "UUIDv7, newest, from its time"} {
		if read[name]*4 > scan {
			t.Errorf("%s: %d messages read, the scan %d", name, read[name], scan)
		}
	}
}

// TestReplayFramesBeforeTheirRequest: E2A_AUDIT copies the requests and
// the frames from two sources, not ordered with each other, so a
// request's frames may be stored before its own copy, by more than the
// clock margin when one source trails. The replay still finds them (from
// the scan's start), instead of calling the request one without frames.
func TestReplayFramesBeforeTheirRequest(t *testing.T) {
	js, nc := server(t)
	ctx := t.Context()
	a, err := audit.New(nc, audit.WithClockMargin(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	rid := uuid.Must(uuid.NewV7()).String()
	f := finalFrameMsg(rid)
	if _, err := js.PublishMsg(ctx, f); err != nil {
		t.Fatal(err)
	}
	waitAuditCtx(t, ctx, js, 1)
	env, _ := json.Marshal(&e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: rid, Method: "chat.send",
		UserID: "alice", Params: map[string]any{"text": "frames first"}})
	rsubj, _ := subjects.Request("demo", rid)
	if _, err := js.Publish(ctx, rsubj, env); err != nil {
		t.Fatal(err)
	}
	waitAuditCtx(t, ctx, js, 2)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	recs, st := collect(t, a, audit.Query{RequestIDs: []string{rid}})
	sum := summaries(recs)[rid]
	if st.Requests != 1 || sum == nil || sum.State != audit.StateComplete || !sum.RequestFound || !sum.OK() {
		t.Fatalf("%+v %+v", st, sum)
	}
}

// missAt returns a UUIDv7 never stored whose time is id's: a miss in the
// middle of the history.
func missAt(t *testing.T, id string) string {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	sec, nsec := u.Time().UnixTime()
	return v7At(time.Unix(sec, nsec))
}

// readAPICase is a GET of the read API timed by timeReadAPI, and the
// status it must answer.
type readAPICase struct {
	name, id string
	want     int
}

// timeReadAPI times GET /v1/requests/{id} of each case on a Service whose
// History is a (the hot streams were purged: every request found comes
// from the history), and checks the status: a request whose id carries
// no time is not looked up, and one whose time is off by more than the
// clock margin is not found (the lookup reads the windows around the
// id's time, never scans: only `e2a replay` finds those).
func timeReadAPI(t *testing.T, nc *nats.Conn, a *audit.Auditor, n int, cases []readAPICase) {
	t.Helper()
	srv := pipetest.ServeHistory(t, nc, a)
	for _, c := range cases {
		before := nc.Stats().InMsgs
		t0 := time.Now()
		status, view, derr := pipetest.GetRequestView(t, srv.URL, c.id)
		took := time.Since(t0)
		if status != c.want || c.want == http.StatusOK && (derr != nil || view.State != egress.StateSucceeded || len(view.Frames) != 1 || len(view.Envelope) == 0) {
			t.Fatalf("GET %s (%s): %d %+v (%v), want %d", c.id, c.name, status, view, derr, c.want)
		}
		t.Logf("GET /v1/requests/{id}: %-40s %d in %8.1f ms, %7d messages read (%d requests in the history)", c.name, status,
			float64(took)/float64(time.Millisecond), nc.Stats().InMsgs-before, n)
	}
}

package egress

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// expiredReads are the reads of a request whose frames aged out: the
// aggregated JSON, waited for, and both streams.
var expiredReads = []testkit.Read{testkit.ReadAPIReads[0], testkit.ReadAPIReads[2], testkit.ReadAPIReads[5], testkit.ReadAPIReads[7]}

// dropFrames are the ways E2A_RESPONSES drops the frames of a request
// whose envelope E2A_REQUESTS keeps: every frame, or its first ones (the
// oldest go first).
var dropFrames = []struct {
	name string
	drop func(t *testing.T, e *testEnv)
}{
	{"every frame", func(t *testing.T, e *testEnv) { natstest.Purge(t, e.js, streams.ResponsesStream) }},
	{"frames 0 and 1", func(t *testing.T, e *testEnv) { natstest.PurgeBelowLast(t, e.js, streams.ResponsesStream) }},
}

// ackPending acknowledges, as the agent does once a request's final frame
// is stored, the requests queued for pool "demo" (natstest.PublishRequest's
// pool) through its durable consumer (created when missing), and returns
// the consumer.
func ackPending(t *testing.T, e *testEnv, n int) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := streams.AgentConsumerConfig("demo", 16)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.js.CreateOrUpdateConsumer(ctx, streams.RequestsStream, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return c
	}
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != n {
		t.Fatalf("acknowledged %d requests, want %d (%v)", got, n, batch.Error())
	}
	return c
}

// A finished request whose frames E2A_RESPONSES dropped while its envelope
// is still in E2A_REQUESTS (E2A_RESPONSES_MAX_BYTES, DiscardOld: the
// responses stream, many frames per request, fills long before the
// requests stream; or a shorter E2A_RESPONSES_MAX_AGE) is answered from
// the History, as the hot streams answered it whole, not as a request
// still pending (202 "pending", a stream waiting for a first frame that
// will never come, then 504) nor as a broken stream (502 invalid_frame
// "stored sequence 2 where 0 was expected").
func TestFramesDroppedEnvelopeKept(t *testing.T) {
	for _, drop := range dropFrames {
		t.Run(drop.name, func(t *testing.T) {
			fh := newFakeHistory()
			e, srv := historyHTTP(t, fh, WithWaitLimits(5*time.Second, 5*time.Second))
			id := historicRequest(t, e)
			ackPending(t, e, 1) // answered: the agent acknowledged it
			base := srv.URL + "/v1/requests/" + id
			hot := map[string]testkit.Answer{}
			for _, c := range expiredReads {
				hot[c.Name] = read(t, base+c.Path, "owner", c.Hdr...)
			}
			fh.reqs[id] = storedHistoric(t, e, id)
			drop.drop(t, e) // the envelope stays
			for _, c := range expiredReads {
				if got := read(t, base+c.Path, "owner", c.Hdr...); got != hot[c.Name] {
					t.Errorf("%s with %s dropped and the envelope kept:\n%+v\nwant (as the hot streams answered)\n%+v", c.Name, drop.name, got, hot[c.Name])
				}
			}
			// Another principal still gets the 404 of an unknown id.
			if got := read(t, base, "other"); got.Status != http.StatusNotFound {
				t.Errorf("another principal: %+v", got)
			}
		})
	}
}

// checkExpired checks that a is the final answer to a read of a request
// whose frames aged out and that no History holds: 410 frames_expired,
// not retryable, naming where the audit copy may be read.
func checkExpired(t *testing.T, what string, a testkit.Answer, id string) {
	t.Helper()
	var body APIError
	if err := json.Unmarshal([]byte(a.Body), &body); err != nil || a.Status != http.StatusGone ||
		body.Error.Code != CodeFramesExpired || body.Error.Retryable || !strings.Contains(body.Error.Message, "e2a replay "+id) {
		t.Errorf("%s: %+v, want 410 frames_expired, not retryable, naming e2a replay %s", what, a, id)
	}
}

// Without a History (E2A_HISTORY off), or with one that lacks the
// request, a request whose frames aged out is answered at once with a
// final 410 frames_expired, not retryable, by every read: no "pending", no
// wait for a first frame that will never come, no 502.
func TestFramesExpiredWithoutHistory(t *testing.T) {
	for _, drop := range dropFrames {
		t.Run(drop.name+", no History", func(t *testing.T) {
			h := startHTTP(t, WithWaitLimits(5*time.Second, 5*time.Second))
			id := uuid.Must(uuid.NewV7()).String()
			h.finished(t, id, 3)
			ackPending(t, h.testEnv, 1)
			drop.drop(t, h.testEnv)
			for _, c := range expiredReads {
				checkExpired(t, c.Name, testkit.Get(t, h.srv.URL+"/v1/requests/"+id+c.Path, c.Hdr...), id)
			}
		})
		t.Run(drop.name+", not in the History", func(t *testing.T) {
			fh := newFakeHistory()
			e, srv := historyHTTP(t, fh, WithWaitLimits(5*time.Second, 5*time.Second))
			id := historicRequest(t, e)
			ackPending(t, e, 1)
			drop.drop(t, e)
			for _, c := range expiredReads {
				checkExpired(t, c.Name, read(t, srv.URL+"/v1/requests/"+id+c.Path, "owner", c.Hdr...), id)
			}
			if len(fh.lookups()) == 0 {
				t.Error("the History was not asked")
			}
		})
	}
}

// A request its pool has not acknowledged (queued, or being answered)
// and of which no frame is stored is pending, as always: 202 "pending",
// whether its pool's consumer exists or not. The consumer's info is read
// once for several reads (cached), and not at all for a request whose
// frames are stored.
func TestUnansweredRequestStaysPending(t *testing.T) {
	h := startHTTP(t)
	snc := h.conn(t)
	infos, err := snc.SubscribeSync("$JS.API.CONSUMER.INFO." + streams.RequestsStream + ".>")
	if err != nil {
		t.Fatal(err)
	}
	seen := func() int {
		t.Helper()
		// The info requests the Service sent are routed to this
		// subscription before their answers: its connection's round
		// trip brings them all.
		if err := snc.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := infos.Pending()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	done := uuid.Must(uuid.NewV7()).String()
	h.finished(t, done, 2)
	if a := testkit.Get(t, h.srv.URL+"/v1/requests/"+done); a.Status != http.StatusOK {
		t.Fatalf("finished request: %+v", a)
	}
	if n := seen(); n != 0 {
		t.Fatalf("%d consumer info requests for a request whose frames are stored", n)
	}
	queued := uuid.Must(uuid.NewV7()).String()
	h.submit(t, newEnvelope(queued))
	pending := func(what string) {
		t.Helper()
		a := testkit.Get(t, h.srv.URL+"/v1/requests/"+queued)
		if a.Status != http.StatusAccepted || !strings.Contains(a.Body, `"state":"pending"`) {
			t.Fatalf("%s: %+v, want 202 pending", what, a)
		}
	}
	pending("no consumer of its pool")
	// Acknowledged: the finished request; the queued one stays above the
	// ack floor. The cached info (no consumer) answers the next reads.
	ackPending(t, h.testEnv, 1)
	pending("queued, the consumer created a moment ago")
	pending("queued, read again")
	if n := seen(); n != 1 {
		t.Fatalf("%d consumer info requests for 3 reads of a pending request, want 1 (cached)", n)
	}
}

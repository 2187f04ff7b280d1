package console_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// streamGets runs fn and returns the message gets it sent, by kind and
// stream ("direct E2A_REQUESTS", "leader E2A_RESPONSES", …). A core
// subscription on the connection the pipeline shares sees every JetStream
// API request sent on it, in order; a marker published on that connection
// after fn arrives after them all.
func streamGets(t *testing.T, nc *nats.Conn, fn func()) map[string]int {
	t.Helper()
	ch := make(chan *nats.Msg, 4096)
	marker := nc.NewInbox()
	for _, subj := range []string{"$JS.API.DIRECT.GET.>", "$JS.API.STREAM.MSG.GET.>", marker} {
		sub, err := nc.ChanSubscribe(subj, ch)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	fn()
	if err := nc.Publish(marker, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if m.Subject == marker {
				return got
			}
			kind, rest := "direct", strings.TrimPrefix(m.Subject, "$JS.API.DIRECT.GET.")
			if strings.HasPrefix(m.Subject, "$JS.API.STREAM.MSG.GET.") {
				kind, rest = "leader", strings.TrimPrefix(m.Subject, "$JS.API.STREAM.MSG.GET.")
			}
			stream, _, _ := strings.Cut(rest, ".")
			got[kind+" "+stream]++
		case <-timeout:
			t.Fatal("the marker never came back")
		}
	}
}

// TestAnothersRequestCostsAsAnUnknownOne: egress answers a request id of
// another principal with the same work as an id nobody used (egress
// owned: "neither the answer nor the timing tells another's request from
// none"). The console's detail answered bob's id to alice after one direct
// get (the owner found, not hers: 404), where an unknown id costs the
// leader's confirmation too; its list with ?request_id=<bob's id> read
// bob's progress from E2A_RESPONSES (one or two gets more than for an
// unknown id) before dropping the row, as a search by bob's task read the
// frames of each of bob's requests it passed over, and the record each of
// bob's pointers names (one index get per request of bob's, none for an
// unused id of the same bucket). Each difference tells alice, by timing,
// that bob's request exists.
func TestAnothersRequestCostsAsAnUnknownOne(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	const bobTask = "bob-task-parity-51c2"
	bobID := p.submit(t, `{"task_id":"`+bobTask+`","params":{"text":"bob's","frames":2}}`, "X-Api-Key", keyBob)
	waitFinal(t, p, bobID)
	waitFor(t, 20*time.Second, "bob's task in the index", func() bool {
		return len(listAs(t, p, keyBob, url.Values{"task": {bobTask}}).Entries) == 1
	})
	unknownID := bobID[:len(bobID)-4] + "zzzz"
	unusedTask := sameBucketID(t, bobTask, "nobody-task")
	asAlice := func(path string, want int) func() {
		return func() {
			if resp, b := p.do(t, "GET", path, "", "X-Api-Key", keyAlice); resp.StatusCode != want {
				t.Fatalf("alice GET %s: %d %s, want %d", path, resp.StatusCode, b, want)
			}
		}
	}
	for _, c := range []struct{ what, bob, unknown string }{
		{"detail", "/console/api/requests/" + bobID, "/console/api/requests/" + unknownID},
		{"list by request id", "/console/api/requests?request_id=" + bobID, "/console/api/requests?request_id=" + unknownID},
		{"list by task", "/console/api/requests?task=" + bobTask, "/console/api/requests?task=" + unusedTask},
	} {
		want := http.StatusOK
		if c.what == "detail" {
			want = http.StatusNotFound
		}
		forBob := streamGets(t, p.nc, asAlice(c.bob, want))
		forUnknown := streamGets(t, p.nc, asAlice(c.unknown, want))
		if c.what == "list by task" {
			// The owner's own search reads the record its pointer names
			// (one direct get of KV_E2A_INDEX more than an unused id): the
			// count sees the index reads the comparison below is about.
			own := streamGets(t, p.nc, func() {
				if pg := listAs(t, p, keyBob, url.Values{"task": {bobTask}}); len(pg.Entries) != 1 {
					t.Fatalf("bob's search by his task: %+v", pg.Entries)
				}
			})
			if own["direct KV_E2A_INDEX"] != forUnknown["direct KV_E2A_INDEX"]+1 {
				t.Fatalf("bob's search by his own task reads the index %d times, alice's by an unused id %d: want one more (the record)",
					own["direct KV_E2A_INDEX"], forUnknown["direct KV_E2A_INDEX"])
			}
		} else if forUnknown["direct E2A_REQUESTS"] == 0 {
			t.Fatalf("alice's %s of an unknown id: no get of E2A_REQUESTS seen (%v): the count sees nothing", c.what, forUnknown)
		}
		if !maps.Equal(forBob, forUnknown) {
			t.Errorf("alice's %s: bob's request costs the gets %v, an unknown one %v: the work must be the same", c.what, forBob, forUnknown)
		}
	}
}

// TestDetailUnreadableIsUnavailable: a request's detail that could not be
// read (NATS unreachable) is 503 unavailable, retryable, as egress's GET
// /v1/requests/{id} answers it and the console's list does; the detail
// answered 404 not_found, telling the page (and any client) that a request
// its owner had just made does not exist.
func TestDetailUnreadableIsUnavailable(t *testing.T) {
	_, nc := natstest.RunServer(t)
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{
		{Principal: "alice", Secret: keyAlice}, {Principal: "ops", Secret: keyOps}},
		Roles: map[string][]string{"ops": {"audit"}}})
	if err != nil {
		t.Fatal(err)
	}
	eg, err := egress.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eg.Close)
	con, err := console.New(context.Background(), nc, eg, console.WithAuth(authFunc(a)), console.WithoutIndexer())
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	srv := serveConsole(t, con)
	nc.Close()
	for _, key := range []string{keyAlice, keyOps} {
		resp, b := testkit.Do(t, "GET", srv.URL+"/console/api/requests/req-unreadable-1", "", "X-Api-Key", key)
		var e struct {
			Error struct {
				Code      string `json:"code"`
				Retryable bool   `json:"retryable"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &e) != nil || e.Error.Code != "unavailable" || !e.Error.Retryable {
			t.Errorf("detail with NATS closed: %d %s, want 503 unavailable, retryable", resp.StatusCode, b)
		}
	}
}

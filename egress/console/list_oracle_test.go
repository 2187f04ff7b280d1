package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// otherBucketID returns an id with prefix whose bucket is none of vs'.
func otherBucketID(t *testing.T, prefix string, vs ...string) string {
	t.Helper()
	taken := map[string]bool{}
	for _, v := range vs {
		taken[idBucket(v)] = true
	}
	for i := range 1_000_000 {
		if id := fmt.Sprintf("%s-%d", prefix, i); !taken[idBucket(id)] {
			return id
		}
	}
	t.Fatal("every bucket taken")
	return ""
}

// listBody is the raw answer of the key's principal's list.
func listBody(t *testing.T, p *pipeline, key string, q url.Values) string {
	t.Helper()
	resp, b := p.do(t, "GET", "/console/api/requests?"+q.Encode(), "", "X-Api-Key", key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list %s: %d %s", q.Encode(), resp.StatusCode, b)
	}
	return string(b)
}

// TestListOfAnothersIDAnswersAsAnUnknownOne: bob filtering his list on
// alice's session, task, context or request id, with any time bound,
// status or limit, gets byte for byte the page of an id nobody uses, in a
// bucket nobody uses: neither entries, nor scanned, nor partial, nor the
// cursor tell him alice's id exists, how many turns it has, or (moving
// until and since) when each was made. The audit role still lists them.
func TestListOfAnothersIDAnswersAsAnUnknownOne(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	const session, task, contextID = "alice-session-5d1f", "alice-task-5d1f", "alice-context-5d1f"
	var turns []string
	for range 4 {
		turns = append(turns, p.submit(t, `{"session_id":"`+session+`","params":{}}`, "X-Api-Key", keyAlice))
	}
	taskReq := p.submit(t, `{"task_id":"`+task+`","params":{}}`, "X-Api-Key", keyAlice)
	p.submit(t, `{"context_id":"`+contextID+`","params":{}}`, "X-Api-Key", keyAlice)
	var aliceSession console.Page
	waitFor(t, 20*time.Second, "alice's requests in the index", func() bool {
		aliceSession = listAs(t, p, keyAlice, url.Values{"session": {session}})
		return len(aliceSession.Entries) == len(turns) &&
			len(listAs(t, p, keyAlice, url.Values{"task": {task}}).Entries) == 1 &&
			len(listAs(t, p, keyAlice, url.Values{"context": {contextID}}).Entries) == 1
	})
	// Bounds between alice's turns (newest first).
	mid := aliceSession.Entries[1].Time.Format(time.RFC3339Nano)
	old := aliceSession.Entries[3].Time.Format(time.RFC3339Nano)
	variants := []url.Values{{}, {"until": {mid}}, {"since": {mid}}, {"since": {old}, "until": {mid}},
		{"status": {console.StatusPending}}, {"limit": {"1"}}, {"until": {mid}, "limit": {"1"}}}
	for _, f := range []struct{ query, value string }{{"session", session}, {"task", task}, {"context", contextID}} {
		unknown := otherBucketID(t, "nobody-"+f.query, session, task, contextID)
		for _, v := range variants {
			forAlice, forUnknown := url.Values{f.query: {f.value}}, url.Values{f.query: {unknown}}
			for k, vs := range v {
				forAlice[k], forUnknown[k] = vs, vs
			}
			if got, want := listBody(t, p, keyBob, forAlice), listBody(t, p, keyBob, forUnknown); got != want {
				t.Errorf("bob lists ?%s: %s; with an unknown id: %s; the pages must be the same", forAlice.Encode(), got, want)
			}
		}
	}
	for _, v := range variants {
		forAlice, forUnknown := url.Values{"request_id": {taskReq}}, url.Values{"request_id": {"nobody-request-1"}}
		for k, vs := range v {
			forAlice[k], forUnknown[k] = vs, vs
		}
		if got, want := listBody(t, p, keyBob, forAlice), listBody(t, p, keyBob, forUnknown); got != want {
			t.Errorf("bob lists ?%s: %s; with an unknown id: %s; the pages must be the same", forAlice.Encode(), got, want)
		}
	}
	if pg := listAs(t, p, keyOps, url.Values{"session": {session}}); len(pg.Entries) != len(turns) || pg.Scanned < len(turns) {
		t.Errorf("the audit role lists alice's session: %+v, want her %d turns", pg, len(turns))
	}
}

// pageShape is what a page says besides its entries' contents.
func pageShape(pg console.Page) string {
	return fmt.Sprintf("%d entries, scanned %d, partial %t, next set %t", len(pg.Entries), pg.Scanned, pg.Partial, pg.Next != 0)
}

// TestListOfOwnBucketTellsNothingOfOthers: carol's requests share bob's
// record bucket and are older than his; alice's bucket holds only hers.
// Bob's page and alice's, each of one request, say the same (scanned,
// partial, whether a next page exists) for every filter: nothing of
// carol's counts. Once carol's keys run past the scan budget, bob's walk
// still stops at the budget (partial, a cursor) and counts none of them.
func TestListOfOwnBucketTellsNothingOfOthers(t *testing.T) {
	const budget = 40
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true, console: []console.Option{console.WithScanBudget(budget)}})
	if bucketOf("alice") == bucketOf("bob") {
		t.Fatal("alice and bob share a bucket")
	}
	carol := sameBucketID(t, "bob", "carol")
	ids := publishRequests(t, p.nc, "idle", 10, func(i int) string {
		return fmt.Sprintf(`{"request_id":"bulk-%04d","user_id":%q,"params":{}}`, i, carol)
	})
	waitIndexed(t, p, ids...)
	bobID := p.submit(t, `{"params":{}}`, "X-Api-Key", keyBob)
	aliceID := p.submit(t, `{"params":{}}`, "X-Api-Key", keyAlice)
	waitIndexed(t, p, bobID, aliceID)
	now := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339Nano)
	for _, q := range []url.Values{{}, {"limit": {"1"}}, {"status": {console.StatusFailed}}, {"until": {now}},
		{"since": {"1h"}, "status": {console.StatusFailed}}, {"until": {now}, "limit": {"1"}}} {
		if b, a := pageShape(listAs(t, p, keyBob, q)), pageShape(listAs(t, p, keyAlice, q)); b != a {
			t.Errorf("?%s: bob's page (%s) is not alice's (%s): it tells bob of carol's requests in his bucket", q.Encode(), b, a)
		}
	}
	// Past the budget: carol's keys are walked no further than it, and
	// still counted in no page; paging on finds bob's one request.
	publishIndexFill(t, natstest.JetStream(t, p.nc), "q."+bucketOf("bob"), 3*budget)
	q := url.Values{"status": {console.StatusPending}}
	pg := listAs(t, p, keyBob, q)
	if !pg.Partial || pg.Next == 0 || pg.Scanned != 0 || len(pg.Entries) != 0 {
		t.Fatalf("bob's page over %d keys of carol's: %s, want partial at the budget, none scanned", 3*budget, pageShape(pg))
	}
	var found []string
	scanned := 0
	for range 4 * budget {
		q.Set("before", fmt.Sprint(pg.Next))
		pg = listAs(t, p, keyBob, q)
		scanned += pg.Scanned
		for _, e := range pg.Entries {
			found = append(found, e.RequestID)
		}
		if pg.Next == 0 {
			break
		}
	}
	if len(found) != 1 || found[0] != bobID || scanned != 1 {
		t.Errorf("paging bob's list on: %v, %d scanned; want his request %s, 1 scanned", found, scanned, bobID)
	}
}

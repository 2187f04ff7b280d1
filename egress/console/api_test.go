package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress/console"
)

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// TestAPIs exercises the JSON APIs and the stream endpoint without auth.
func TestAPIs(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	id := p.submit(t, `{"task_id":"api-task","params":{"text":"api test","frames":4,"api_key":"sk-live-0123456789","nested":{"password":"hunter2"}}}`)
	waitFinal(t, p, id)

	// List with filters over HTTP. The index's entry trails the request's
	// final frame by a batch (waitFinal saw the entry listed, not yet its
	// final status and task key), so wait for the filtered list to show it.
	var b []byte
	waitFor(t, 20*time.Second, "the request in the filtered list", func() bool {
		var resp *http.Response
		resp, b = p.do(t, "GET", "/console/api/requests?task=api-task&status=succeeded&since=1h&limit=10", "")
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %s", resp.StatusCode, b)
		}
		return len(decode[console.Page](t, b).Entries) > 0
	})
	pg := decode[console.Page](t, b)
	if len(pg.Entries) != 1 || pg.Entries[0].RequestID != id || pg.Entries[0].Frames != 8 {
		t.Fatalf("list page %s", b)
	}
	for _, bad := range []string{"status=nope", "since=yesterday", "before=x", "limit=0"} {
		if resp, b := p.do(t, "GET", "/console/api/requests?"+bad, ""); resp.StatusCode != 400 {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, b)
		}
	}

	// One request: entry, envelope without auth or secrets, replay command.
	resp, b := p.do(t, "GET", "/console/api/requests/"+url.PathEscape(id), "")
	if resp.StatusCode != 200 {
		t.Fatalf("detail: %d %s", resp.StatusCode, b)
	}
	d := decode[console.RequestDetail](t, b)
	if d.Entry == nil || d.Entry.Status != console.StatusSucceeded || d.Envelope == nil {
		t.Fatalf("detail %s", b)
	}
	if d.ReplayCommand != "e2a replay --request "+id {
		t.Errorf("replay command %q", d.ReplayCommand)
	}
	if strings.Contains(string(b), "sk-live") || strings.Contains(string(b), "hunter2") || strings.Contains(string(b), `"auth"`) {
		t.Errorf("detail shows a secret: %s", b)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", resp.Header)
	}
	if resp, _ := p.do(t, "GET", "/console/api/requests/no-such-request", ""); resp.StatusCode != 404 {
		t.Errorf("unknown request: %d", resp.StatusCode)
	}

	// The stream: every frame in order, then a resume from Last-Event-ID.
	resp, b = p.do(t, "GET", d.StreamURL, "", "Accept", "text/event-stream")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	evs := readSSE(t, strings.NewReader(string(b)))
	if len(evs) != 8 {
		t.Fatalf("%d events, want 8", len(evs))
	}
	for i, ev := range evs {
		f, err := e2a.ResponseFromJSON([]byte(ev.data))
		if err != nil || f.Sequence != int64(i) || ev.id != strconv.Itoa(i) || ev.event != f.ResponseKind {
			t.Fatalf("event %d: %+v %v", i, ev, err)
		}
	}
	_, b = p.do(t, "GET", d.StreamURL, "", "Accept", "text/event-stream", "Last-Event-ID", "4")
	evs = readSSE(t, strings.NewReader(string(b)))
	if len(evs) != 3 || evs[0].id != "5" || evs[2].id != "7" {
		t.Fatalf("resumed events %+v", evs)
	}

	// Counters: every stage of this process, the consumers and streams.
	resp, b = p.do(t, "GET", "/console/api/stats", "")
	if resp.StatusCode != 200 {
		t.Fatalf("stats: %d %s", resp.StatusCode, b)
	}
	st := decode[console.Stats](t, b)
	stages := map[string]console.StageStats{}
	for _, s := range st.Stages {
		stages[s.Stage] = s
	}
	for _, name := range []string{"ingress", "agent", "egress", "index"} {
		s, ok := stages[name]
		if !ok || s.Total == nil || *s.Total < 1 {
			t.Errorf("stage %s: %+v", name, s)
		}
	}
	if s := stages["agent"]; s.InFlight == nil || s.Lag == nil {
		t.Errorf("agent in flight / lag missing: %s", b)
	}
	names := map[string]bool{}
	for _, c := range st.Consumers {
		names[c.Name] = true
	}
	for _, n := range []string{"agent-demo", console.RequestsConsumer} {
		if !names[n] {
			t.Errorf("consumer %s missing: %s", n, b)
		}
	}
	for _, c := range st.Consumers {
		if c.Name == "agent-demo" && (c.Pool != "demo" || c.NoLiveWorker) {
			t.Errorf("the demo pool has a worker: %+v", c)
		}
	}
	// A second reading a second later has rates.
	waitFor(t, 5*time.Second, "a reading with rates over a second", func() bool {
		_, b = p.do(t, "GET", "/console/api/stats", "")
		st = decode[console.Stats](t, b)
		return st.Window >= 1 && st.Stages[0].Rate != nil
	})
	if st.Window < 1 || st.Stages[0].Rate == nil {
		t.Errorf("second reading without rates: %s", b)
	}

	// The demo form goes through ingress.
	resp, b = p.do(t, "POST", "/console/api/demo", `{"text":"from the form","frames":2}`, "X-E2A-Console", "1")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("demo: %d %s", resp.StatusCode, b)
	}
	demoID := decode[struct {
		RequestID string `json:"request_id"`
	}](t, b).RequestID
	if e := waitFinal(t, p, demoID)[demoID]; e.Frames != 6 || e.Pool != "demo" {
		t.Errorf("demo entry %+v", e)
	}
	if resp, _ := p.do(t, "POST", "/console/api/demo", `{}`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("demo without the console header: %d", resp.StatusCode)
	}

	// The page and its assets.
	resp, b = p.do(t, "GET", "/console", "")
	if resp.StatusCode != 200 || !strings.Contains(string(b), "/console/assets/console.js") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("page: %d %v", resp.StatusCode, resp.Header)
	}
	for _, a := range []string{"console.js", "console.css", "login.js"} {
		if resp, _ := p.do(t, "GET", "/console/assets/"+a, ""); resp.StatusCode != 200 {
			t.Errorf("asset %s: %d", a, resp.StatusCode)
		}
	}
}

// TestAuth checks that, with auth configured, the page and every API need
// the credential of the other endpoints, by header or by the sign-in
// cookie, and that the credential never reaches a handler or an answer.
func TestAuth(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	id := p.submit(t, `{"params":{"text":"secret stuff","frames":1}}`, "X-Api-Key", keyAlice)
	waitFinal(t, p, id)

	resp, b := p.do(t, "GET", "/console", "")
	if resp.StatusCode != 401 || !strings.Contains(string(b), "login.js") {
		t.Fatalf("page without credential: %d", resp.StatusCode)
	}
	for _, path := range []string{"/console/api/requests", "/console/api/requests/" + id, "/console/api/requests/" + id + "/stream", "/console/api/stats", "/console/api/session"} {
		if resp, b := p.do(t, "GET", path, ""); resp.StatusCode != 401 || strings.Contains(string(b), "secret stuff") {
			t.Errorf("%s without credential: %d %s", path, resp.StatusCode, b)
		}
		if resp, _ := p.do(t, "GET", path, "", "X-Api-Key", "wrong-key-0000000000000000"); resp.StatusCode != 401 {
			t.Errorf("%s with a wrong key: %d", path, resp.StatusCode)
		}
	}
	// By header.
	resp, b = p.do(t, "GET", "/console/api/session", "", "X-Api-Key", keyBob)
	if resp.StatusCode != 200 || decode[map[string]any](t, b)["principal"] != "bob" {
		t.Fatalf("session by header: %d %s", resp.StatusCode, b)
	}
	// Sign-in: wrong secret, missing console header, then right.
	if resp, _ := p.do(t, "POST", "/console/api/login", `{"scheme":"apiKey","secret":"nope-nope-nope-nope"}`, "X-E2A-Console", "1"); resp.StatusCode != 401 {
		t.Errorf("login with a wrong key: %d", resp.StatusCode)
	}
	if resp, _ := p.do(t, "POST", "/console/api/login", `{"scheme":"apiKey","secret":"`+keyAlice+`"}`); resp.StatusCode != 403 {
		t.Errorf("login without the console header: %d", resp.StatusCode)
	}
	resp, b = p.do(t, "POST", "/console/api/login", `{"scheme":"apiKey","secret":"`+keyAlice+`"}`, "X-E2A-Console", "1")
	if resp.StatusCode != 200 || strings.Contains(string(b), keyAlice) {
		t.Fatalf("login: %d %s", resp.StatusCode, b)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "e2a_console" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" {
		t.Fatalf("cookie %+v", ck)
	}
	cookie := ck.Name + "=" + ck.Value
	resp, b = p.do(t, "GET", "/console", "", "Cookie", cookie)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "console.js") {
		t.Fatalf("page with cookie: %d", resp.StatusCode)
	}
	resp, b = p.do(t, "GET", "/console/api/requests", "", "Cookie", cookie)
	if resp.StatusCode != 200 || !strings.Contains(string(b), id) || strings.Contains(string(b), keyAlice) {
		t.Fatalf("list with cookie: %d %s", resp.StatusCode, b)
	}
	resp, b = p.do(t, "GET", "/console/api/requests/"+id+"/stream", "", "Cookie", cookie, "Accept", "text/event-stream")
	if resp.StatusCode != 200 || len(readSSE(t, strings.NewReader(string(b)))) != 5 {
		t.Fatalf("stream with cookie: %d %s", resp.StatusCode, b)
	}
	// The demo form forwards the signed-in credential to ingress.
	resp, b = p.do(t, "POST", "/console/api/demo", `{"text":"as alice","frames":1}`, "Cookie", cookie, "X-E2A-Console", "1")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("demo: %d %s", resp.StatusCode, b)
	}
	demoID := decode[struct {
		RequestID string `json:"request_id"`
	}](t, b).RequestID
	if e := waitFinal(t, p, demoID)[demoID]; e.Principal != "alice" {
		t.Errorf("demo principal %q, want alice", e.Principal)
	}
	// Sign-out clears the cookie.
	resp, _ = p.do(t, "POST", "/console/api/logout", `{}`, "Cookie", cookie, "X-E2A-Console", "1")
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == "e2a_console" && c.MaxAge < 0)
	}
	if resp.StatusCode != 200 || !cleared {
		t.Errorf("logout: %d %v", resp.StatusCode, resp.Cookies())
	}
}

// TestOwnership checks the console's side of the ownership rule: a
// principal lists, opens and streams only its own requests; another
// principal is told they do not exist; a principal with the audit role sees
// everyone's.
func TestOwnership(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	const canary = "bob_canary_4f1d2a"
	bobID := p.submit(t, `{"params":{"text":"`+canary+`","frames":1}}`, "X-Api-Key", keyBob)
	aliceID := p.submit(t, `{"params":{"text":"alice here","frames":1}}`, "X-Api-Key", keyAlice)
	waitFinal(t, p, bobID)
	waitFinal(t, p, aliceID)

	for _, path := range []string{"/console/api/requests", "/console/api/requests?user=bob", "/console/api/requests?request_id=" + bobID,
		"/console/api/requests/" + bobID, "/console/api/requests/" + bobID + "/stream"} {
		resp, b := p.do(t, "GET", path, "", "X-Api-Key", keyAlice, "Accept", "text/event-stream")
		if strings.Contains(string(b), canary) || strings.Contains(string(b), bobID) {
			t.Errorf("alice GET %s: %d, shows bob's request: %s", path, resp.StatusCode, b)
		}
		if strings.Contains(path, bobID) && !strings.Contains(path, "?") && resp.StatusCode != http.StatusNotFound {
			t.Errorf("alice GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	resp, b := p.do(t, "GET", "/console/api/requests", "", "X-Api-Key", keyAlice)
	if resp.StatusCode != 200 || !strings.Contains(string(b), aliceID) {
		t.Errorf("alice's own list: %d %s", resp.StatusCode, b)
	}
	// The owner streams its request through the console (egress checks the
	// principal the console authenticated).
	resp, b = p.do(t, "GET", "/console/api/requests/"+bobID+"/stream", "", "X-Api-Key", keyBob, "Accept", "text/event-stream")
	if resp.StatusCode != 200 || !strings.Contains(string(b), canary) {
		t.Errorf("bob streams his own request: %d %s", resp.StatusCode, b)
	}
	// The audit role reads everyone's.
	resp, b = p.do(t, "GET", "/console/api/requests", "", "X-Api-Key", keyOps)
	if resp.StatusCode != 200 || !strings.Contains(string(b), bobID) || !strings.Contains(string(b), aliceID) {
		t.Errorf("audit list: %d %s", resp.StatusCode, b)
	}
	resp, b = p.do(t, "GET", "/console/api/requests/"+bobID, "", "X-Api-Key", keyOps)
	if resp.StatusCode != 200 || !strings.Contains(string(b), canary) {
		t.Errorf("audit detail: %d %s", resp.StatusCode, b)
	}
}

// TestDotIDs: requests whose ids are the dot segments "." and ".." are
// reachable through the console's links (escaped, not dropped from the
// path); the detail's stream_url names such an id in the query, which a
// browser's fetch or EventSource keeps (a path's dot segment, escaped
// too, it resolves).
func TestDotIDs(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	for _, id := range []string{".", ".."} {
		got := p.submit(t, `{"request_id":"`+id+`","params":{"text":"dots","frames":1}}`)
		if got != id {
			t.Fatalf("submitted %q, got %q", id, got)
		}
		waitFinal(t, p, id)
		resp, b := p.do(t, "GET", "/console/api/requests/"+strings.ReplaceAll(id, ".", "%2E"), "")
		d := decode[console.RequestDetail](t, b)
		if resp.StatusCode != 200 || d.RequestID != id || d.StreamURL != "/console/api/request/stream?id="+url.QueryEscape(id) {
			t.Fatalf("%q: %d %s", id, resp.StatusCode, b)
		}
		resp, b = p.do(t, "GET", d.StreamURL, "", "Accept", "text/event-stream")
		if resp.StatusCode != 200 || len(readSSE(t, strings.NewReader(string(b)))) == 0 {
			t.Fatalf("%q stream: %d %s", id, resp.StatusCode, b)
		}
		// The forms with the id in the query, which the page uses for
		// these ids (a browser resolves the path's dot segments, escaped
		// too: TestBrowserDotIDs).
		resp, b = p.do(t, "GET", "/console/api/request?id="+url.QueryEscape(id), "")
		if q := decode[console.RequestDetail](t, b); resp.StatusCode != 200 || q.RequestID != id {
			t.Fatalf("%q by ?id=: %d %s", id, resp.StatusCode, b)
		}
		resp, b = p.do(t, "GET", "/console/api/request/stream?id="+url.QueryEscape(id)+"&from=1", "", "Accept", "text/event-stream")
		if ev := readSSE(t, strings.NewReader(string(b))); resp.StatusCode != 200 || len(ev) == 0 || ev[0].id != "1" {
			t.Fatalf("%q stream by ?id= from 1: %d %s", id, resp.StatusCode, b)
		}
	}
	for _, path := range []string{"/console/api/request", "/console/api/request/stream"} {
		if resp, b := p.do(t, "GET", path, ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s without an id: %d %s, want 400", path, resp.StatusCode, b)
		}
	}
}

// requestsInStats is the message count of E2A_REQUESTS in the stats
// the key's principal is answered (-1 when the answer is not 200 or lists
// no such stream).
func requestsInStats(t *testing.T, p *pipeline, key string) int64 {
	t.Helper()
	resp, b := p.do(t, "GET", "/console/api/stats", "", "X-Api-Key", key)
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	st := decode[console.Stats](t, b)
	for _, s := range st.Streams {
		if s.Name == "E2A_REQUESTS" {
			return int64(s.Messages)
		}
	}
	return -1
}

// TestStatsOnlyForOperators: the console's every answer is scoped to its
// principal (a principal without the audit or admin role sees its own
// requests only). GET /console/api/stats holds the deployment's figures
// (the count of every principal's requests in E2A_REQUESTS, the ingress
// request rate of all tenants, every agent pool and its upstream): only
// the audit and admin roles are answered them (alice would watch bob's
// traffic otherwise, each request bob makes moving her stats); the session
// tells the page whether to show them.
func TestStatsOnlyForOperators(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	for _, c := range []struct {
		who, key string
		stats    bool
	}{{"alice", keyAlice, false}, {"ops (audit role)", keyOps, true}} {
		resp, b := p.do(t, "GET", "/console/api/session", "", "X-Api-Key", c.key)
		var s struct {
			Stats bool `json:"stats"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &s) != nil || s.Stats != c.stats {
			t.Errorf("%s's session: %d %s; want stats %t", c.who, resp.StatusCode, b, c.stats)
		}
	}
	if resp, b := p.do(t, "GET", "/console/api/stats", "", "X-Api-Key", keyAlice); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice's stats: %d %s; want 403", resp.StatusCode, b)
	}
	before := requestsInStats(t, p, keyAlice)
	if before < 0 {
		return // alice is not answered the deployment's figures
	}
	for i := 0; i < 3; i++ {
		p.submit(t, `{"params":{"text":"bob's","frames":1}}`, "X-Api-Key", keyBob)
	}
	var after int64
	waitFor(t, 20*time.Second, "bob's requests in the audit role's stats", func() bool {
		return requestsInStats(t, p, keyOps) >= before+3
	})
	after = requestsInStats(t, p, keyAlice)
	if after >= before+3 {
		t.Errorf("alice (no audit role) reads the stats: E2A_REQUESTS went from %d to %d messages as bob made 3 requests; "+
			"want the stats refused to her (403) or scoped to her own requests: another principal's activity is not hers to see", before, after)
	}
}

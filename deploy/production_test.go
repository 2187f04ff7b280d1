package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestProductionDeployment runs production as production runs: three
// nats-server processes with deploy/nats (TLS for clients and routes,
// certificates generated here; accounts.conf with passwords from the
// environment), then the e2a binary as separate OS processes configured by
// deploy/k8s/config.yaml: `e2a streams apply` as admin, `e2a serve` as
// serve, `e2a agent --pool demo` as agent-demo, `e2a agent --pool
// workflow` as agent-workflow, `e2a archive` as archive, `e2a tail` and
// `e2a replay` as audit. It
// sends traffic through every protocol (E2A 202 + SSE, E2A SSE in one
// call, E2A wait, A2A message/send, ACP, A2E, workflow execute) and the
// console, starts a second serve, then SIGKILLs a NATS server (the leader
// of E2A_RESPONSES) and the first serve mid-traffic: every accepted request
// ends complete, every stage stays up and ready, the archiver stored every
// E2A_AUDIT message in E2A_ARCHIVE once, and no log holds a permissions
// violation.
func TestProductionDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster and 6 e2a processes")
	}
	testStart := time.Now()
	c := startNATSCluster(t, 3)
	d := newDeployment(t, c)
	t.Logf("cluster and e2a binary ready in %v", time.Since(testStart).Round(time.Millisecond))
	// A backstop for the calls below: each step waits within its own bound.
	// (100 s was once less than the whole test took on a machine running
	// two other suites at once, 130 s: every call after it failed.)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// An upgraded deployment: E2A_IDEMPOTENCY, which earlier versions
	// provisioned and no code used, is still there, as they made it.
	// streams apply leaves it alone and the stages start without reading
	// it (no user but admin may: checkLogs finds no permissions
	// violation); an operator deletes it as admin, below while the stages
	// run (docs/operations.md, "Upgrading").
	leftNC, _ := c.connect("admin")
	leftJS, _ := jetstream.New(leftNC)
	if _, err := leftJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "E2A_IDEMPOTENCY", Description: "E2A idempotency keys",
		History: 1, TTL: 24 * time.Hour, MaxBytes: 384 * streams.MiB, Storage: jetstream.FileStorage, Replicas: 3}); err != nil {
		t.Fatalf("the bucket an earlier version left: %v", err)
	}

	// Provisioning, as the Job does.
	out := d.run("streams-apply", "admin", 60*time.Second, "streams", "apply")
	t.Logf("streams apply:\n%s", strings.TrimSpace(out))
	if strings.Contains(out, "IDEMPOTENCY") {
		t.Errorf("streams apply touched E2A_IDEMPOTENCY:\n%s", out)
	}

	apiKey := randomSecret(t)
	opsKey := randomSecret(t)
	// ops holds the audit role: the console's deployment-wide stats are
	// an operator's (tester, without a role, is refused them).
	serveEnv := map[string]string{"E2A_API_KEYS": "tester:" + apiKey + ",ops:" + opsKey, "E2A_AUTH_ROLES": "ops:audit"}
	auth := http.Header{"X-Api-Key": {apiKey}}
	serve1 := d.start("serve-1", "serve", serveEnv, "serve")
	demoAgent := d.start("agent-demo-1", "agent-demo", nil, "agent", "--pool", "demo", "--concurrency", "64")
	wfAgent := d.start("agent-workflow-1", "agent-workflow", nil, "agent", "--pool", "workflow", "--concurrency", "16")
	// The shipped 10 s flush would make the last batch wait that long.
	archiver := d.start("archive-1", "archive", map[string]string{"E2A_ARCHIVE_FLUSH_INTERVAL": "500ms"}, "archive")
	for _, p := range []*e2aProc{serve1, demoAgent, wfAgent, archiver} {
		d.waitReady(p, 30*time.Second)
	}
	// --since the test's start: the tail process may come up after the
	// first requests are stored (a slow start under load), and must still
	// print them.
	tail := d.start("tail", "audit", nil, "tail", "--since", testStart.UTC().Format(time.RFC3339Nano))
	t.Logf("stages ready %v after the start", time.Since(testStart).Round(time.Millisecond))
	if _, err := leftJS.KeyValue(ctx, "E2A_IDEMPOTENCY"); err != nil {
		t.Errorf("E2A_IDEMPOTENCY after streams apply and the stages' start: %v", err)
	}
	if err := leftJS.DeleteKeyValue(ctx, "E2A_IDEMPOTENCY"); err != nil {
		t.Errorf("admin deletes E2A_IDEMPOTENCY: %v", err)
	}

	// Every protocol, through serve-1. The tail prints these requests
	// (waited for below).
	client := &http.Client{Timeout: 20 * time.Second}
	protocols(t, ctx, client, serve1.url(), auth, http.Header{"X-Api-Key": {opsKey}})

	// One e2a_ingress_accepted_total per protocol, whatever the answer
	// mode (202, SSE, wait, JSON-RPC, A2E, the workflow API).
	sc := scrape(t, serve1)
	for _, proto := range []string{"e2a", "a2a", "acp", "a2e", "a2e.workflow"} {
		if !strings.Contains(sc, `e2a_ingress_accepted_total{protocol="`+proto+`"}`) {
			t.Errorf("serve-1 /metrics: no e2a_ingress_accepted_total for %s", proto)
		}
	}
	if !strings.Contains(sc, `e2a_ingress_accepted_total{protocol="e2a"} 3`) {
		t.Errorf("serve-1 counted the 3 E2A requests (202, SSE, wait) as %q", regexp.MustCompile(`e2a_ingress_accepted_total\{protocol="e2a"\} \S+`).FindString(sc))
	}

	// A second serve; traffic on both; then a NATS server and serve-1 die.
	serve2 := d.start("serve-2", "serve", serveEnv, "serve")
	d.waitReady(serve2, 30*time.Second)
	adminNC, _ := c.connect("admin")
	adminJS, _ := jetstream.New(adminNC)
	victim := c.node(streamLeader(t, ctx, adminJS, streams.ResponsesStream))
	var alive sync.Map // base URL → true
	alive.Store(serve1.url(), true)
	alive.Store(serve2.url(), true)
	pick := func() string {
		var bases []string
		alive.Range(func(k, _ any) bool { bases = append(bases, k.(string)); return true })
		return bases[rand.IntN(len(bases))]
	}
	var (
		mu          sync.Mutex
		accepted    []string
		received    = map[string][]int64{}
		n           atomic.Int64
		phase       atomic.Int32 // 0 before the kills, 1 after the NATS kill, 2 after the serve kill
		perPhase    [3]atomic.Int64
		stop        atomic.Bool
		wg          sync.WaitGroup
		firstAfterN atomic.Int64
		natsKilled  time.Time
		lastRefusal atomic.Value // what the last request given up on got
	)
	for cl := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				id := fmt.Sprintf("load-%d-%d", cl, n.Add(1))
				why, ok := postUntilAcceptedWhy(client, pick, auth, id)
				if !ok {
					lastRefusal.Store(why)
					continue
				}
				ph := phase.Load()
				if perPhase[ph].Add(1) == 1 && ph == 1 {
					firstAfterN.Store(int64(time.Since(natsKilled)))
				}
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
				seqs, err := readSSE(ctx, pick, auth, id)
				mu.Lock()
				received[id] = seqs
				mu.Unlock()
				if err != nil {
					t.Errorf("SSE %s: %v (got %v)", id, err, seqs)
				}
			}
		}()
	}
	waitCount := func(ph int, min int64, atLeast time.Duration) {
		start := time.Now()
		testkit.Until(30*time.Second, func() bool { return perPhase[ph].Load() >= min && time.Since(start) >= atLeast })
	}
	waitCount(0, 20, time.Second)
	t.Logf("killing %s (leader of %s) after %d accepted requests", victim.name, streams.ResponsesStream, perPhase[0].Load())
	natsKilled = time.Now()
	c.kill(victim)
	phase.Store(1)
	waitCount(1, 10, 3*time.Second)
	t.Logf("killing serve-1 after %d requests accepted since the NATS kill (first %v after it)", perPhase[1].Load(), time.Duration(firstAfterN.Load()).Round(time.Millisecond))
	alive.Delete(serve1.url())
	d.kill(serve1)
	phase.Store(2)
	waitCount(2, 10, 2*time.Second)
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	ids := slices.Clone(accepted)
	mu.Unlock()
	t.Logf("%d requests accepted: %d before the kills, %d after the NATS kill, %d after the serve kill",
		len(ids), perPhase[0].Load(), perPhase[1].Load(), perPhase[2].Load())
	for ph := range perPhase {
		if perPhase[ph].Load() == 0 {
			t.Fatalf("no request accepted in phase %d (the last refused POST got: %v)", ph, lastRefusal.Load())
		}
	}

	// Every accepted request complete, read by the audit user; each SSE
	// client got exactly the stored frames.
	auditNC, _ := c.connect("audit")
	checkAllComplete(t, ctx, auditNC, ids, audit.SourceHot)
	checkReceived(t, ctx, auditNC, ids, received)

	// The push stage runs in serve by default, as the NATS user serve:
	// its consumer handed out every frame (each request's envelope and
	// configs looked up; none has a config) through the kills, without a
	// permissions violation (checkLogs below). What the SIGKILLed serve-1
	// held stays pending an ack until the consumer's ack wait (1 min)
	// gives it to serve-2 (push's TestStageCrash proves that part).
	var pushState string
	waitUntil(t, 30*time.Second, "the push consumer handed out every frame", func() bool {
		ci, err := adminJS.Consumer(ctx, streams.ResponsesStream, "push")
		if err != nil {
			pushState = err.Error()
			return false
		}
		info := ci.CachedInfo()
		pushState = fmt.Sprintf("delivered %d, pending %d, ack pending %d, redelivered %d", info.Delivered.Consumer, info.NumPending, info.NumAckPending, info.NumRedelivered)
		return info.Delivered.Consumer > 0 && info.NumPending == 0
	})
	t.Logf("push consumer: %s", pushState)

	// `e2a replay` as an operator runs it: the first protocol requests
	// and a sample of the load, every one complete and sound.
	sample := append([]string{"p-e2a-202", "p-e2a-sse", "p-e2a-wait"}, ids[:min(len(ids), 20)]...)
	replayOut := d.run("replay", "audit", 30*time.Second, append([]string{"replay", "--no-frames"}, sample...)...)
	sums := summaries(t, replayOut)
	for _, id := range sample {
		if s := sums[id]; s == nil || s.State != audit.StateComplete || !s.OK() {
			t.Errorf("e2a replay %s: %+v", id, s)
		}
	}

	// `e2a tail` printed the requests it saw, their frames and summaries;
	// it ends on SIGINT with status 0.
	waitUntil(t, 20*time.Second, "tail printed the summary of p-e2a-202", func() bool {
		return hasLine(tail.stdoutPath(), `"kind":"summary"`, `"request_id":"p-e2a-202"`)
	})
	for _, want := range [][]string{{`"kind":"request"`, `"request_id":"p-e2a-202"`}, {`"kind":"frame"`, `"request_id":"p-e2a-202"`}} {
		if !hasLine(tail.stdoutPath(), want...) {
			t.Errorf("tail printed no %s", want)
		}
	}
	if t.Failed() {
		// What tail did print, to tell a late start from a lost request.
		t.Logf("tail (--since %s) stdout, head and tail:\n%s\n…\n%s", testStart.UTC().Format(time.RFC3339Nano),
			fileHead(3000, tail.stdoutPath()), fileTail(3000, tail.stdoutPath()))
	}
	_ = tail.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-tail.done:
		if tail.err != nil {
			t.Errorf("tail after SIGINT: %v (exit %s)\n%s", tail.err, exitStatus(tail), tail.stderrTail())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("tail did not end on SIGINT")
	}
	tail.killed = true

	// `e2a archive` stored all of E2A_AUDIT in E2A_ARCHIVE through the
	// kill, each message once, read back by the audit user.
	defer func() {
		if t.Failed() {
			logArchiverState(t, ctx, adminJS, archiver)
		}
	}()
	last := waitArchived(t, ctx, auditNC, 30*time.Second)
	c.waitStreamsSynced(30*time.Second, streams.ArchiveStream)
	batches := checkArchive(t, ctx, auditNC, last)
	archScrape := scrape(t, archiver)
	checkArchiveCounters(t, archiver.name, archScrape)
	t.Logf("e2a archive: E2A_AUDIT 1..%d in %d batches", last, batches)

	// The survivors are up and ready; nobody was refused anything.
	for _, p := range []*e2aProc{serve2, demoAgent, wfAgent, archiver} {
		d.waitReady(p, 10*time.Second)
	}
	d.checkRunning()
	d.checkLogs()
	checkAlertMetrics(t, map[string]string{"serve": scrape(t, serve2), "agent-demo": scrape(t, demoAgent), "agent-workflow": scrape(t, wfAgent),
		"archive": archScrape})
	t.Logf("total %v", time.Since(testStart).Round(time.Millisecond))
}

// protocols sends one request through every protocol and the console, and
// checks each answer.
func protocols(t *testing.T, ctx context.Context, client *http.Client, base string, auth, ops http.Header) {
	t.Helper()
	do := func(what, method, path, accept, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		for k, v := range auth {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(what string, code int, body string, wantCode int, wants ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("%s: %d %s", what, code, body)
			return
		}
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %s in %s", what, w, body)
			}
		}
	}
	// Unauthenticated: refused.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/requests", strings.NewReader(requestBody("p-anon", `"frames":1`)))
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("request without credentials: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	code, body := do("E2A 202", http.MethodPost, "/v1/requests", "", requestBody("p-e2a-202", `"frames":3`))
	expect("E2A 202", code, body, http.StatusAccepted, `"request_id":"p-e2a-202"`)
	if seqs, err := readSSE(ctx, fixedBase(base), auth, "p-e2a-202"); err != nil || len(seqs) < 4 {
		t.Errorf("E2A SSE of p-e2a-202: %v %v", seqs, err)
	}
	code, body = do("E2A SSE", http.MethodPost, "/v1/requests", "text/event-stream", requestBody("p-e2a-sse", `"frames":3`))
	expect("E2A SSE", code, body, http.StatusOK, `"is_final":true`, "e2a.complete")
	code, body = do("E2A wait", http.MethodPost, "/v1/requests?wait=true", "", requestBody("p-e2a-wait", `"frames":2`))
	// (It once answered 202 "running" when a lagging replica answered the
	// last-frame lookup after the wait; the wait now answers from the final
	// frame it read.)
	expect("E2A wait", code, body, http.StatusOK, `"request_id":"p-e2a-wait"`, `"is_final":true`)
	code, body = do("A2A message/send", http.MethodPost, "/a2a", "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"p-a2a-1","parts":[{"kind":"text","text":"hello"}]}}}`)
	expect("A2A message/send", code, body, http.StatusOK, `"completed"`)
	code, body = do("ACP initialize", http.MethodPost, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	expect("ACP initialize", code, body, http.StatusOK, `"protocolVersion"`)
	code, body = do("ACP session/new", http.MethodPost, "/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &sess); err != nil || code != http.StatusOK || sess.Result.SessionID == "" {
		t.Fatalf("ACP session/new: %d %s", code, body)
	}
	code, body = do("ACP session/prompt", http.MethodPost, "/acp", "", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+sess.Result.SessionID+`","prompt":[{"type":"text","text":"hello"}]}}`)
	expect("ACP session/prompt", code, body, http.StatusOK, `"session/update"`, `"stopReason":"end_turn"`)
	code, body = do("A2E", http.MethodPost, "/a2e", "", `{"a2e":"1.0","id":"h1","type":"handshake/req"}`+"\n"+`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"p-a2e-1","text":"hello"}`+"\n")
	expect("A2E", code, body, http.StatusOK, `"handshake/resp"`, `"tool/call/resp"`)
	wf := `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"wait\",\"operation\":{\"Wait\":{\"duration\":10}}}\n{\"type\":\"beginExecution\",\"executionId\":\"p-wf-1\",\"operationOrder\":[\"wait\"]}"}`
	code, body = do("workflow execute", http.MethodPost, "/api/v1/workflows/execute", "", wf)
	expect("workflow execute", code, body, http.StatusOK, `"status":"success"`, `"waited_ms"`)

	code, body = do("workflow execution", http.MethodGet, "/api/v1/executions/p-wf-1", "", "")
	expect("workflow execution", code, body, http.StatusOK, `"p-wf-1"`)
	code, body = do("console stats", http.MethodGet, "/console/api/stats", "", "")
	expect("console stats without a role", code, body, http.StatusForbidden, `"forbidden"`)
	tester := auth
	auth = ops
	code, body = do("console stats", http.MethodGet, "/console/api/stats", "", "")
	expect("console stats as ops (audit role)", code, body, http.StatusOK, `"agent-demo"`, `"console-index-requests-v2"`)
	auth = tester

	// The console lists them (its index trails the streams a little).
	var listed string // the last page read, for the failure
	if !testkit.Until(20*time.Second, func() bool {
		_, body := do("console", http.MethodGet, "/console/api/requests?limit=100", "", "")
		listed = body
		var page struct {
			Entries []struct {
				RequestID string `json:"request_id"`
				Status    string `json:"status"`
			} `json:"entries"`
		}
		_ = json.Unmarshal([]byte(body), &page)
		for _, e := range page.Entries {
			if e.RequestID == "p-e2a-wait" && e.Status == "succeeded" {
				return true
			}
		}
		return false
	}) {
		// Which part trails: the index (the request is missing from the
		// page; the stats show the index consumer's backlog) or the
		// progress read from the frames (listed, not succeeded).
		_, one := do("console entry", http.MethodGet, "/console/api/requests?request_id=p-e2a-wait", "", "")
		auth = ops
		_, stats := do("console stats", http.MethodGet, "/console/api/stats", "", "")
		auth = tester
		t.Errorf("20s passed and the console does not list p-e2a-wait as succeeded\nlist: %s\nentry: %s\nstats: %s", listed, one, stats)
	}
}

// summaries decodes the summary records of `e2a replay` output.
func summaries(t *testing.T, ndjson string) map[string]*audit.Summary {
	t.Helper()
	out := map[string]*audit.Summary{}
	for _, l := range strings.Split(strings.TrimSpace(ndjson), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("replay output %q: %v", l, err)
		}
		if r.Kind == audit.KindSummary {
			out[r.RequestID] = r.Summary
		}
	}
	return out
}

// waitUntil polls cond (bounded by within) and fails the test with what
// when it never holds.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !testkit.Until(within, cond) {
		t.Errorf("%v passed and not: %s", within, what)
	}
}

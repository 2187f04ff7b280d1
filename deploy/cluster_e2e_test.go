package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// syncLog is a log sink shown when the test fails.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNATSClusterSecurityAndFailover runs deploy/nats/nats-server.conf on
// three real nats-server processes (built from the module this one
// requires) and shows:
//
//  1. the admin user provisions the streams with 3 replicas; the stage
//     users' start-up check (streams.Apply, no drift) passes with their
//     read-only stream permissions (audit's, which runs none, refuses it:
//     TestNATSUsersLeastPrivilege);
//  2. each stage user is refused what its stage must not do (and nothing
//     it tried lands in a stream);
//  3. traffic through ingress (HTTP, user ingress) → agent workers (demo,
//     user agent-demo) → egress (SSE with resume, user egress) works, a
//     cancel goes through the control stream;
//  4. one server is killed (SIGKILL) mid-traffic, the stream leader of
//     E2A_RESPONSES: every request ingress accepted ends with its frames
//     0..n and one final frame (e2a.CheckFrames), every SSE client got
//     exactly those frames, and E2A_AUDIT holds them too (read back with
//     the read-only audit user);
//  5. an archiver (package archive, user archive) running through it all,
//     its ordered consumer on the killed server but its connection and the
//     leaders of E2A_AUDIT and E2A_ARCHIVE on others (so that only the
//     consumer's missing heartbeats tell it), stored every E2A_AUDIT
//     message in E2A_ARCHIVE exactly once (read back with the audit user),
//     missing and skipping none, refused nothing.
func TestNATSClusterSecurityAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster")
	}
	testStart := time.Now()
	c := startNATSCluster(t, 3)
	t.Logf("cluster up in %v", time.Since(testStart).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()

	// 1. Provisioning as admin, replicas 3, then the stages' start-up check.
	cfg := streams.DefaultConfig()
	cfg.Replicas = 3
	cfg.RequestsMaxBytes = 64 << 20
	adminNC, _ := c.connect("admin")
	adminJS, _ := jetstream.New(adminNC)
	applyUntil(t, ctx, adminJS, cfg)
	waitDirect(t, ctx, adminNC, probeSubjects)
	for _, user := range []string{"serve", "ingress", "egress", "agent-demo", "archive"} {
		nc, _ := c.connect(user)
		js, _ := jetstream.New(nc)
		startupCheckUntil(t, ctx, js, cfg, user)
	}

	// 2. Refusals.
	checkRefusals(t, ctx, c, adminNC)

	// 3. The stages, each with its own user.
	log := &syncLog{}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() {
		if t.Failed() {
			t.Logf("stage logs:\n%s", log.String())
		}
	}()
	ingressNC, _ := c.connect("ingress")
	egressNC, _ := c.connect("egress")
	eg, err := egress.New(egressNC, egress.WithLogger(logger), egress.WithHeartbeatInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer eg.Close()
	in, err := ingress.New(ingressNC, eg, ingress.WithDefaultPool(demo.Pool), ingress.WithPublishTimeout(3*time.Second), ingress.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	web := httptest.NewServer(mux)
	defer web.Close()

	agentCtx, stopAgents := context.WithCancel(context.Background())
	var agents sync.WaitGroup
	for i := range 2 {
		nc, _ := c.connect("agent-demo")
		agents.Add(1)
		go func() {
			defer agents.Done()
			err := agent.Run(agentCtx, nc, demo.Pool, demo.New(),
				agent.WithConcurrency(16), agent.WithAckWait(4*time.Second), agent.WithPublishTimeout(40*time.Second),
				agent.WithDrainTimeout(2*time.Second), agent.WithWorkerID("w"+strconv.Itoa(i)), agent.WithLogger(logger))
			if err != nil {
				t.Errorf("agent %d: %v", i, err)
			}
		}()
	}
	defer func() { stopAgents(); agents.Wait() }()

	// The archiver, as its own user, from before the first request to the
	// end, its ordered consumer on the node killed below (the leader of
	// E2A_RESPONSES) and its connection on another: the consumer goes away
	// with the node, the connection stays up.
	victim := c.node(streamLeader(t, ctx, adminJS, streams.ResponsesStream))
	if victim == nil {
		t.Fatal("no node leads E2A_RESPONSES")
	}
	arch := startArchiverConsumerOn(t, agentCtx, c, adminNC, victim, archive.WithFlushInterval(200*time.Millisecond),
		archive.WithBatchBytes(64<<10), archive.WithLogger(logger.With("stage", "archive")))
	defer func() {
		stopAgents()
		if err := testkit.Receive(t, arch.done, 10*time.Second, "the archiver did not stop"); err != nil {
			t.Errorf("archiver: %v", err)
		}
	}()

	// A cancel: ingress's user publishes it on the control stream, the
	// worker holding the request closes it with e2a.error cancelled.
	client := &http.Client{Timeout: 10 * time.Second}
	if code := post(t, client, web.URL, "cancel-me", `"frames":200,"delay_ms":20`); code != http.StatusAccepted {
		t.Fatalf("post cancel-me: %d", code)
	}
	ingressJS, _ := jetstream.New(ingressNC)
	waitFrames(t, ctx, adminNC, "cancel-me", 1)
	if res, err := agent.Cancel(ctx, ingressJS, "cancel-me"); err != nil || !res.Published {
		t.Fatalf("cancel: %+v, %v", res, err)
	}

	// 4. Traffic, and a crash in the middle of it (the leader of
	// E2A_RESPONSES may have moved since the archiver started: the victim
	// stays the node that holds the archiver's consumer).
	var (
		mu         sync.Mutex
		accepted   []string
		received   = map[string][]int64{}
		n          atomic.Int64
		afterKill  atomic.Int64
		killed     atomic.Bool
		stop       atomic.Bool
		killedAt   time.Time
		firstAfter atomic.Int64 // nanoseconds from the kill to the first acceptance
	)
	const clients = 4
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				id := fmt.Sprintf("c%d-%d", cl, n.Add(1))
				if !postUntilAccepted(client, fixedBase(web.URL), nil, id) {
					continue
				}
				if killed.Load() {
					if afterKill.Add(1) == 1 {
						firstAfter.Store(int64(time.Since(killedAt)))
					}
				}
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
				seqs, err := readSSE(ctx, fixedBase(web.URL), nil, id)
				mu.Lock()
				received[id] = seqs
				mu.Unlock()
				if err != nil {
					t.Errorf("SSE %s: %v (got %v)", id, err, seqs)
				}
			}
		}()
	}
	testkit.Eventually(t, 25*time.Second, "40 requests accepted before the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= 40
	})
	mu.Lock()
	before := len(accepted)
	mu.Unlock()
	t.Logf("killing %s (leader of %s when the archiver started, now %s; the archiver's consumer's server) after %d accepted requests",
		victim.name, streams.ResponsesStream, streamLeader(t, ctx, adminJS, streams.ResponsesStream), before)
	killedAt = time.Now()
	c.kill(victim)
	killed.Store(true)
	// Traffic goes on until a dozen requests were accepted after the
	// crash and at least 4 s passed (bounded at 25 s).
	testkit.Until(25*time.Second, func() bool { return afterKill.Load() >= 12 && time.Since(killedAt) >= 4*time.Second })
	stop.Store(true)
	wg.Wait()
	t.Logf("first request accepted %v after the crash; %d SSE reads stalled %v and resumed", time.Duration(firstAfter.Load()).Round(time.Millisecond), sseStalls.Load(), sseStallTimeout)
	mu.Lock()
	ids := slices.Clone(accepted)
	mu.Unlock()
	t.Logf("%d requests accepted, %d after the kill", len(ids), afterKill.Load())
	if before == 0 || afterKill.Load() == 0 {
		t.Fatalf("traffic did not run on both sides of the kill: %d before, %d after", before, afterKill.Load())
	}

	// Every accepted request: frames 0..n, one final, nothing lost, read
	// by the read-only audit user.
	defer func() {
		if t.Failed() {
			diagnose(t, adminJS, adminNC, ids)
		}
	}()
	auditNC, _ := c.connect("audit")
	checkAllComplete(t, ctx, auditNC, ids, audit.SourceHot)
	// What each request stored, read back below, is in every replica (the
	// direct gets may be answered by any of them).
	c.waitStreamsSynced(30*time.Second, streams.ResponsesStream)
	checkReceived(t, ctx, auditNC, ids, received)
	// The cancelled request ended with e2a.error cancelled.
	fr := storedFrames(t, ctx, auditNC, "cancel-me")
	if err := e2a.CheckFrames(fr); err != nil {
		t.Errorf("cancel-me: %v", err)
	} else if eb, _ := fr[len(fr)-1].Error(); eb.Code != e2a.ErrCodeCancelled {
		t.Errorf("cancel-me ended with %s", fr[len(fr)-1].Body)
	}
	// E2A_AUDIT sourced everything too.
	checkAllComplete(t, ctx, auditNC, append(ids, "cancel-me"), audit.SourceAudit)

	// 5. The archiver archived all of E2A_AUDIT, each message once, read
	// back by the audit user (every replica of E2A_ARCHIVE caught up: any
	// may answer a direct get).
	last := waitArchived(t, ctx, auditNC, 30*time.Second)
	c.waitStreamsSynced(30*time.Second, streams.ArchiveStream)
	batches := checkArchive(t, ctx, auditNC, last)
	checkArchiveCounters(t, "archiver", registryText(t, arch.reg))
	if arch.sink.waitFor(0, "permissions violation") == nil {
		t.Errorf("the archive user was refused something: %s", arch.sink)
	}
	t.Logf("E2A_AUDIT 1..%d archived in %d batches", last, batches)
	t.Logf("total %v", time.Since(testStart).Round(time.Millisecond))
}

// registryText is what /metrics would serve for reg.
func registryText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// diagnose logs the state of the requests that are not complete and of the
// pool's consumer.
func diagnose(t *testing.T, js jetstream.JetStream, nc *nats.Conn, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cons, err := js.Consumer(ctx, streams.RequestsStream, "agent-demo"); err == nil {
		info, err := cons.Info(ctx)
		if err == nil {
			t.Logf("consumer agent-demo: pending %d, ack pending %d, redelivered %d, waiting %d, delivered %+v, ack floor %+v, leader %s",
				info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting, info.Delivered, info.AckFloor, info.Cluster.Leader)
		}
	}
	for _, id := range ids {
		subj, _ := subjects.Response(id)
		msgs, err := streams.DirectGetAll(ctx, nc, streams.ResponsesStream, subj, 0, 256)
		var final bool
		if len(msgs) > 0 {
			last := msgs[len(msgs)-1] // one frame, or a burst
			if fr, ferr := e2a.BurstResponses(last.Header.Get(subjects.HeaderFrames), last.Data); ferr == nil {
				final = fr[len(fr)-1].IsFinal
			}
		}
		if !final {
			reqSubj, _ := subjects.Request(demo.Pool, id)
			req, rerr := streams.LastBySubject(ctx, nc, streams.RequestsStream, reqSubj)
			t.Logf("%s: %d frames, no final (%v); request stored at %d (%v)", id, len(msgs), err, req.Seq, rerr)
		}
	}
}

// provisioned connects as the admin user to c and provisions the streams
// of cfg there (applyUntil): the start of a test of another user's
// permissions.
func provisioned(t *testing.T, ctx context.Context, c *natsCluster, cfg streams.Config) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	adminNC, _ := c.connect("admin")
	adminJS, err := jetstream.New(adminNC)
	if err != nil {
		t.Fatal(err)
	}
	applyUntil(t, ctx, adminJS, cfg)
	return adminNC, adminJS
}

// provisionedCluster starts three nats-server processes with the shipped
// configuration and provisions the streams as admin (provisioned) with
// replicas 3, the defaults otherwise but what adjust changes (nil: none).
// It returns the cluster, a context ending after timeout (or with the
// test) and admin's connection.
func provisionedCluster(t *testing.T, timeout time.Duration, adjust func(*streams.Config)) (*natsCluster, context.Context, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	c := startNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cfg := streams.DefaultConfig()
	cfg.Replicas = 3
	if adjust != nil {
		adjust(&cfg)
	}
	nc, js := provisioned(t, ctx, c, cfg)
	return c, ctx, nc, js
}

// applyUntil provisions the streams (streams.Apply), asking again in
// 5-second attempts while the new cluster settles.
func applyUntil(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg streams.Config) {
	t.Helper()
	applyAgain(t, ctx, js, cfg, "apply streams")
}

// startupCheckUntil runs a stage's start-up check (streams.Apply, which
// must find nothing to change) as user, asking again while the cluster
// settles: right after provisioning an API request can go unanswered on a
// busy machine (a stage retries its start the same way), but a check that
// answers must report no change.
func startupCheckUntil(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg streams.Config, user string) {
	t.Helper()
	if rep := applyAgain(t, ctx, js, cfg, "start-up check as "+user); rep.Changed() {
		t.Fatalf("start-up check as %s changed the streams:\n%s", user, rep)
	}
}

// applyAgain runs streams.Apply in 5-second attempts until one answers
// without error (or ctx ends: the test fails with what) and returns its
// report.
func applyAgain(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg streams.Config, what string) streams.Report {
	t.Helper()
	var (
		rep streams.Report
		err error
	)
	testkit.Until(time.Hour, func() bool { // until ctx ends
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if rep, err = streams.Apply(actx, js, cfg); err == nil || ctx.Err() != nil {
			return true
		}
		t.Logf("%s, again: %v", what, err)
		return false
	})
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, rep)
	}
	return rep
}

// probeSubjects maps each stream the direct gets of this test read to a
// subject a refused publish tried to store in it.
var probeSubjects = map[string]string{
	streams.RequestsStream:  "e2a.req.demo.x",
	streams.ResponsesStream: "e2a.resp.x",
	streams.ControlStream:   "e2a.ctl.x",
	streams.ArchiveStream:   subjects.ArchiveBatches,
}

// waitDirect waits until each stream answers a direct get. A replicated
// stream just created subscribes its direct-get responders once its
// replicas are elected and current, which can come seconds after the
// create's answer on a busy machine; until then the stages see
// "pipeline unavailable, retry later", and this test could not tell a
// stored message from a silent stream.
func waitDirect(t *testing.T, ctx context.Context, nc *nats.Conn, probes map[string]string) {
	t.Helper()
	start := time.Now()
	for name, subj := range probes {
		if _, err := directLast(ctx, nc, name, subj); err != nil && !errors.Is(err, streams.ErrNoMessages) {
			t.Fatalf("stream %s answers no direct get: %v", name, err)
		}
	}
	t.Logf("direct gets answered %v after provisioning", time.Since(start).Round(time.Millisecond))
}

// directLast is streams.LastBySubject asked again, in 5-second attempts,
// while the stream has no direct-get responder (see waitDirect) or an
// attempt goes unanswered, until ctx ends.
func directLast(ctx context.Context, nc *nats.Conn, stream, subj string) (m streams.RawMsg, err error) {
	testkit.Until(time.Hour, func() bool { // until ctx ends
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		m, err = streams.LastBySubject(actx, nc, stream, subj)
		again := errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded)
		return !again || ctx.Err() != nil
	})
	return m, err
}

func streamLeader(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) string {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream %s cluster info %+v: %v", name, info, err)
	}
	return info.Cluster.Leader
}

// checkRefusals shows that each stage user is refused what its stage must
// not do, and that none of it lands.
func checkRefusals(t *testing.T, ctx context.Context, c *natsCluster, adminNC *nats.Conn) {
	t.Helper()
	type op struct{ user, kind, subject string }
	for _, o := range []op{
		{"ingress", "pub", "e2a.resp.x"},
		{"ingress", "sub", "e2a.live.>"},
		{"ingress", "pub", "$JS.API.STREAM.DELETE.E2A_REQUESTS"},
		{"ingress", "pub", "$JS.API.CONSUMER.MSG.NEXT.E2A_REQUESTS.agent-demo"},
		{"egress", "pub", "e2a.req.demo.x"},
		{"egress", "pub", "e2a.resp.x"},
		{"egress", "pub", "e2a.ctl.x"},
		{"egress", "sub", "e2a.req.>"},
		{"egress", "pub", "$JS.API.STREAM.PURGE.E2A_AUDIT"}, // it reads the audit history (E2A_HISTORY), never changes it
		{"agent-demo", "pub", "e2a.req.demo.x"},
		{"agent-demo", "pub", "e2a.ctl.x"},
		{"agent-demo", "sub", "e2a.req.>"},
		{"agent-demo", "pub", "$JS.API.CONSUMER.CREATE.E2A_REQUESTS.agent-workflow.e2a.req.workflow.x"},
		{"agent-demo", "pub", "$JS.API.CONSUMER.CREATE.E2A_REQUESTS.agent-demo.e2a.req.x"},
		{"agent-demo", "pub", "$JS.API.CONSUMER.MSG.NEXT.E2A_REQUESTS.agent-workflow"},
		{"agent-demo", "pub", "$JS.API.STREAM.PURGE.E2A_RESPONSES"},
		{"serve", "pub", "e2a.resp.x"},
		{"serve", "pub", "$JS.API.STREAM.UPDATE.E2A_REQUESTS"},
		{"audit", "pub", "e2a.req.demo.x"},
		{"audit", "pub", "e2a.resp.x"},
		{"audit", "pub", "e2a.ctl.x"},
		{"audit", "pub", "$JS.API.STREAM.PURGE.E2A_AUDIT"},
		{"audit", "pub", "$JS.API.CONSUMER.CREATE.E2A_REQUESTS.spy"},
		// Only the archiver writes the archive; it writes nothing else,
		// and reads E2A_AUDIT through its own consumers only.
		{"archive", "pub", "e2a.req.demo.x"},
		{"archive", "pub", "e2a.resp.x"},
		{"archive", "pub", "e2a.ctl.x"},
		{"archive", "sub", "e2a.live.>"},
		{"archive", "pub", "$JS.API.STREAM.PURGE.E2A_ARCHIVE"},
		{"archive", "pub", "$JS.API.STREAM.UPDATE.E2A_ARCHIVE"},
		{"archive", "pub", "$JS.API.CONSUMER.CREATE.E2A_REQUESTS.spy"},
		{"archive", "pub", "$JS.API.CONSUMER.MSG.NEXT.E2A_REQUESTS.agent-demo"},
		{"archive", "pub", "$JS.API.DIRECT.GET.E2A_AUDIT"},
		{"ingress", "pub", subjects.ArchiveBatches},
		{"egress", "pub", subjects.ArchiveBatches},
		{"serve", "pub", subjects.ArchiveBatches},
		{"agent-demo", "pub", subjects.ArchiveBatches},
		{"audit", "pub", subjects.ArchiveBatches},
		{"audit", "pub", "$JS.API.CONSUMER.CREATE.E2A_AUDIT.spy"},
	} {
		nc, sink := c.connect(o.user)
		expectRefused(t, nc, sink, o.user, o.kind, o.subject)
		nc.Close()
	}
	// Nothing of it was stored; the streams are all there.
	for stream, subj := range probeSubjects {
		if _, err := directLast(ctx, adminNC, stream, subj); !errors.Is(err, streams.ErrNoMessages) {
			t.Errorf("%s holds %s: %v", stream, subj, err)
		}
	}
	js, _ := jetstream.New(adminNC)
	for _, s := range []string{streams.RequestsStream, streams.ResponsesStream, streams.ControlStream, streams.AuditStream, streams.ArchiveStream} {
		if _, err := js.Stream(ctx, s); err != nil {
			t.Errorf("stream %s: %v", s, err)
		}
	}
}

func requestBody(id, params string) string {
	return `{"request_id":"` + id + `","method":"chat.send","params":{"text":"hello ` + id + `",` + params + `}}`
}

func post(t *testing.T, client *http.Client, base, id, params string) int {
	t.Helper()
	resp, err := client.Post(base+"/v1/requests", "application/json", strings.NewReader(requestBody(id, params)))
	if err != nil {
		t.Fatalf("post %s: %v", id, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// fixedBase is a base URL provider that always answers base.
func fixedBase(base string) func() string { return func() string { return base } }

// postUntilAccepted posts a request until ingress answers 202, retrying
// the same request id (deduplicated by the stream) while the cluster
// elects new leaders, each attempt to the URL base gives (another replica
// after one died), with the headers hdr.
func postUntilAccepted(client *http.Client, base func() string, hdr http.Header, id string) bool {
	_, ok := postUntilAcceptedWhy(client, base, hdr, id)
	return ok
}

// postUntilAcceptedWhy is postUntilAccepted, which also returns what the
// last refused attempt got (an HTTP status and the start of its body, or
// the client's error): the clue when a test sees no request accepted.
func postUntilAcceptedWhy(client *http.Client, base func() string, hdr http.Header, id string) (last string, ok bool) {
	ok = testkit.Until(10*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodPost, base()+"/v1/requests", strings.NewReader(requestBody(id, `"frames":3,"delay_ms":20`)))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				return true
			}
			last = fmt.Sprintf("%s: %d %q", req.URL.Host, resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		return false
	})
	if ok {
		return "", true
	}
	return last, false
}

// sseStalls counts SSE attempts abandoned because nothing arrived for
// sseStallTimeout (see readSSE).
var sseStalls atomic.Int64

// sseStallTimeout is how long an SSE client waits for a byte (a frame or
// the heartbeat egress writes every second here) before it reconnects, as
// a real client's read timeout would.
const sseStallTimeout = 8 * time.Second

// readSSE reads the E2A SSE stream of id to its final frame, resuming with
// Last-Event-ID when the stream breaks or stalls (on the URL base gives at
// that moment: any replica serves any request), and returns the frame
// sequences received. hdr is added to every request (credentials).
func readSSE(ctx context.Context, base func() string, hdr http.Header, id string) ([]int64, error) {
	var seqs []int64
	var lastErr error
	for attempt := 0; attempt < 30 && ctx.Err() == nil; attempt++ {
		actx, cancel := context.WithCancel(ctx)
		activity := make(chan struct{}, 1)
		stalled := atomic.Bool{}
		go func() {
			t := time.NewTimer(sseStallTimeout)
			defer t.Stop()
			for {
				select {
				case <-actx.Done():
					return
				case <-activity:
					t.Reset(sseStallTimeout)
				case <-t.C:
					stalled.Store(true)
					sseStalls.Add(1)
					cancel()
					return
				}
			}
		}()
		touch := func() {
			select {
			case activity <- struct{}{}:
			default:
			}
		}
		req, _ := http.NewRequestWithContext(actx, http.MethodGet, base()+"/v1/requests/"+id+"/stream", nil)
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Header.Set("Accept", "text/event-stream")
		if len(seqs) > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(seqs[len(seqs)-1], 10))
		}
		final := false
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			lastErr = err
		} else {
			if resp.StatusCode == http.StatusOK {
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					touch()
					data, ok := strings.CutPrefix(sc.Text(), "data: ")
					if !ok {
						continue
					}
					var f e2a.Response
					if err := json.Unmarshal([]byte(data), &f); err != nil || f.RequestID != id {
						continue // an error event, not a frame
					}
					seqs = append(seqs, f.Sequence)
					if f.IsFinal {
						final = true
						break
					}
				}
				lastErr = sc.Err()
			} else {
				lastErr = fmt.Errorf("status %d", resp.StatusCode)
			}
			resp.Body.Close()
		}
		cancel()
		if final {
			return seqs, nil
		}
		if stalled.Load() {
			lastErr = fmt.Errorf("stalled %v: %w", sseStallTimeout, lastErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return seqs, fmt.Errorf("no final frame: %v", lastErr)
}

// waitFrames waits until id has at least n stored messages (each one frame
// or a burst: at least n frames).
func waitFrames(t *testing.T, ctx context.Context, nc *nats.Conn, id string, n int) {
	t.Helper()
	subj, _ := subjects.Response(id)
	var err error
	testkit.Until(time.Hour, func() bool { // until ctx ends
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var msgs []streams.RawMsg
		msgs, err = streams.DirectGetAll(cctx, nc, streams.ResponsesStream, subj, 0, 64)
		if err == nil && len(msgs) >= n {
			err = nil
			return true
		}
		if err == nil {
			err = fmt.Errorf("%d stored", len(msgs))
		}
		return ctx.Err() != nil
	})
	if ctx.Err() != nil && err != nil {
		t.Fatalf("%s: fewer than %d frames: %v", id, n, err)
	}
}

// storedFrames reads every stored frame of id.
func storedFrames(t *testing.T, ctx context.Context, nc *nats.Conn, id string) []*e2a.Response {
	t.Helper()
	subj, _ := subjects.Response(id)
	var msgs []streams.RawMsg
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err = streams.DirectGetAll(cctx, nc, streams.ResponsesStream, subj, 0, 256)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("%s: read frames: %v", id, err)
	}
	var out []*e2a.Response
	for _, m := range msgs {
		fr, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			t.Fatalf("%s: frame at %d: %v", id, m.Seq, err)
		}
		out = append(out, fr...)
	}
	return out
}

// checkReceived checks that every request of ids stored frames 0..n with
// one final frame, last, succeeded (e2a.CheckFrames), and that its SSE
// client received exactly those (received[id]: the sequences it read).
func checkReceived(t *testing.T, ctx context.Context, nc *nats.Conn, ids []string, received map[string][]int64) {
	t.Helper()
	for _, id := range ids {
		frames := storedFrames(t, ctx, nc, id)
		if err := e2a.CheckFrames(frames); err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if f := frames[len(frames)-1]; f.Status != e2a.StatusSucceeded {
			t.Errorf("%s ended %s %s", id, f.Status, f.Body)
		}
		want := make([]int64, len(frames))
		for i := range want {
			want[i] = int64(i)
		}
		if got := received[id]; !slices.Equal(got, want) {
			t.Errorf("%s: SSE client got %v, stored %v", id, got, want)
		}
	}
}

// checkAllComplete waits until every request of ids is complete in source
// with audit.Replay, then fails on any violation.
func checkAllComplete(t *testing.T, ctx context.Context, nc *nats.Conn, ids []string, source audit.Source) {
	t.Helper()
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var last map[string]*audit.Summary
	pending := 0
	testkit.Until(time.Hour, func() bool { // until ctx ends
		last = map[string]*audit.Summary{}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = a.Replay(rctx, audit.Query{RequestIDs: ids, Source: source, NoFrames: true}, func(r audit.Record) error {
			if r.Kind == audit.KindSummary {
				last[r.RequestID] = r.Summary
			}
			return nil
		})
		cancel()
		pending = 0
		for _, id := range ids {
			// A request whose frames are all there but whose envelope is
			// not yet is pending too: E2A_AUDIT sources E2A_REQUESTS and
			// E2A_RESPONSES apart, and after a leader's loss one source can
			// lag the other (CI: two requests' frames were read before their
			// envelopes, reported "stored without their envelope").
			if s := last[id]; s == nil || s.State != audit.StateComplete || !s.RequestFound {
				pending++
			}
		}
		return (err == nil && pending == 0) || ctx.Err() != nil
	})
	if err != nil || pending > 0 {
		t.Fatalf("%s: %d of %d requests not complete (last error %v)", source, pending, len(ids), err)
	}
	for _, id := range ids {
		if s := last[id]; !s.OK() {
			t.Errorf("%s: %s: %v", source, id, s.Violations)
		}
	}
}

package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestConsoleMethodNotAllowedIsJSON: every console API answers its
// errors in the console's JSON shape ({"error":{"code","message",
// "retryable"}}, apiError), as egress's own routes do for a method they
// do not take (egress.MethodNotAllowed: 405 in the E2A shape with Allow).
// A DELETE or PUT on a console API path got net/http's plain-text "Method
// Not Allowed" instead, which the page's api() cannot read.
func TestConsoleMethodNotAllowedIsJSON(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/console/api/requests/r-1"},
		{"POST", "/console/api/requests"},
		{"PUT", "/console/api/stats"},
		{"GET", "/console/api/login"},
	} {
		resp, b := p.do(t, c.method, c.path, "{}", "X-E2A-Console", "1", "Content-Type", "application/json")
		var e struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Code == "" {
			t.Errorf("%s %s: %d %q Allow=%q %q, want 405 in the console's JSON error shape with Allow",
				c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), b)
		}
	}
}

// TestConsoleAuditSeesNoWebhookPath: an A2A message/send with an inline
// push notification config kept the webhook's URL (path and query) in its
// envelope (the normalizer stripped only the token, the credentials and
// secret-named query keys; it keeps scheme and host now, but the streams
// hold envelopes of earlier versions). The A2A push methods hide the URL's path and
// query from a principal other than the task's owner (audit, admin:
// a2a.HideSecretsV03/V1, "as the console shows configs"), and the console's
// push view shows the host only; but the console's request detail showed
// the audit role the owner's full webhook URL (a Slack-style hook's path
// is its secret) in the envelope. It shows scheme and host to everyone now.
func TestConsoleAuditSeesNoWebhookPath(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	const hook = "https://hooks.example.com/services/T0000/B0000/hook-path-secret?channel=q-secret"
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","kind":"message",
	  "messageId":"m-1","parts":[{"kind":"text","text":"hi"}]},"configuration":{"pushNotificationConfig":
	  {"url":"` + hook + `","token":"tok-secret","authentication":{"schemes":["Bearer"],"credentials":"cred-secret"}}}}}`
	n := normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "idle"}})
	res, err := n.FromA2A(normalizer.Input{Body: []byte(body), Principal: &normalizer.Principal{UserID: "alice"},
		RequestID: "req-push-hook"})
	if err != nil {
		t.Fatal(err)
	}
	// As an earlier version stored it: the whole URL.
	res.Envelope.Params["push_notification_config"].(map[string]any)["url"] = hook
	env, err := json.Marshal(res.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "hook-path-secret") {
		t.Fatalf("the envelope holds no webhook path (nothing to check): %s", env)
	}
	subj, err := subjects.Request("idle", "req-push-hook")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := natstest.JetStream(t, p.nc).Publish(ctx, subj, env, jetstream.WithMsgID("req-push-hook")); err != nil {
		t.Fatal(err)
	}
	resp, b := p.do(t, "GET", "/console/api/requests/req-push-hook", "", "X-Api-Key", keyOps)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("audit detail: %d %s", resp.StatusCode, b)
	}
	for _, secret := range []string{"tok-secret", "cred-secret", "hook-path-secret", "q-secret"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the audit role's detail of alice's request shows %q: %s", secret, b)
		}
	}
}

// publishIndexFill stores n small messages on the index stream's subject
// key (what the indexer writes for another user's requests), asynchronously,
// waiting for the acknowledgements every 1,000 messages: the client stalls
// (and PublishAsync fails under load) past 4,000 outstanding publishes, its
// default limit.
func publishIndexFill(t *testing.T, js jetstream.JetStream, key string, n int) {
	t.Helper()
	subj := subjects.KV(console.Bucket, key)
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("index fill not acknowledged")
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("index fill not acknowledged")
	}
}

// TestConsoleEmptyListCostIsNotTheIndex: docs/capacity.md gives the
// cost of a list by user as "the page, plus the other users' requests in
// that bucket", and doc.go says a page never scans (a call examines at
// most the scan budget). A principal with no request in the index (a new
// user opening the console, whose page polls the list every 2 s; or a
// search by a task id nobody used) examined no key, so the budget never
// stopped the walk: lister.List walked the whole index backwards in windows
// of at most 8,192 sequences, one direct get each, down to the index's
// first message. Its cost grew with the index (24 h of every user's
// requests), not with the page. It is one get now.
func TestConsoleEmptyListCostIsNotTheIndex(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	if bucketOf("alice") == bucketOf("bob") {
		t.Fatal("alice and bob share a bucket")
	}
	js := natstest.JetStream(t, p.nc)
	var gets atomic.Int64
	sub, err := p.nc.Subscribe(subjects.DirectGet("KV_"+console.Bucket), func(*nats.Msg) { gets.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	listGets := func() int64 {
		if err := p.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		before := gets.Load()
		pg := listAs(t, p, keyBob, url.Values{})
		if len(pg.Entries) != 0 || pg.Next != 0 {
			t.Fatalf("bob's page %+v, want empty", pg)
		}
		if err := p.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		return gets.Load() - before
	}
	publishIndexFill(t, js, "q."+bucketOf("alice"), 20_000)
	small := listGets()
	publishIndexFill(t, js, "q."+bucketOf("alice"), 180_000)
	large := listGets()
	t.Logf("direct gets of bob's empty page: %d with 20,000 index messages, %d with 200,000", small, large)
	if large > small+2 {
		t.Errorf("bob's empty page costs %d direct gets on an index of 200,000 messages, %d on 20,000: the walk is a scan of the index", large, small)
	}
}

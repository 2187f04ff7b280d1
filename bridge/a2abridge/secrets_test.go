package a2abridge_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestCredentials: an agent that requires a bearer token and a header
// gets both, and the request's W3C trace context, on every call over each
// binding (HTTP headers, gRPC metadata: service parameters); a wrong key
// ends the request upstream_auth, not retryable. Neither key is in the
// log, in E2A_REQUESTS, E2A_RESPONSES or E2A_BRIDGE.
func TestCredentials(t *testing.T) {
	t.Parallel()
	const key, wrong, hdr = "sk-a2a-31f9c0", "sk-a2a-wrong-8e21", "hdr-a2a-5d77"
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, up.Options{Binding: b, Bearer: key, Headers: map[string]string{"X-Tenant-Key": hdr}})
			p := pipetest.Start(t)
			log := &testkit.Buffer{}
			credPool(t, p, "good", srv.BaseURL(), bridge.Credentials{APIKey: key, Headers: map[string]string{"X-Tenant-Key": hdr}}, log)
			credPool(t, p, "bad", srv.BaseURL(), bridge.Credentials{APIKey: wrong, Headers: map[string]string{"X-Tenant-Key": hdr}}, log)

			tp := "00-" + traceID + "-00f067aa0ba902b7-01"
			if a := askWith(t, p, "good", `{"params":{"text":"stream: secret"}}`, tp); a.Text(e2a.DeltaText) != up.StreamText("secret") {
				t.Errorf("with the key: %q, final %s", a.Text(e2a.DeltaText), a.Final().Body)
			}
			calls := srv.Calls()
			for _, c := range calls {
				if c.Refused || !strings.Contains(header(c.Header, "traceparent"), traceID) {
					t.Errorf("call %s: refused %v, headers %v", c.Method, c.Refused, c.Header)
				}
			}
			a := askWith(t, p, "bad", `{"params":{"text":"stream: nope"}}`, tp)
			if code, retryable := a.ErrorCode(); code != bridge.CodeAuth || retryable {
				t.Errorf("a wrong key: %s (retryable %v), want %s", code, retryable, bridge.CodeAuth)
			}
			for _, secret := range []string{key, wrong, hdr} {
				if strings.Contains(log.String(), secret) {
					t.Errorf("a credential is in the log:\n%s", log.String())
				}
				stored := []string{streams.RequestsStream, streams.ResponsesStream, "KV_" + streams.BridgeBucket}
				if n := natstest.StoredWith(t, p.JS, secret, stored...); n > 0 {
					t.Errorf("a credential is stored in %d messages of %v", n, stored)
				}
			}
		})
	}
}

// echoAuth is an agent whose working status quotes the Authorization
// header it got (a debugging agent's "calling with …"), then answers
// "done".
var echoAuth = statusQuoter{status: func(auth string) []*a2a.Message {
	return []*a2a.Message{a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("calling with "+auth+"; "))}
}}

// TestWorkingStatusScrubbed: a working status's message, which the bridge
// writes as the agent's status-update, is the agent's own words about its work, as its
// errors are: the bridge's credentials are taken out of it (the package
// documentation: status messages are scrubbed), and stored nowhere.
func TestWorkingStatusScrubbed(t *testing.T) {
	t.Parallel()
	const key = "sk-a2a-status-6b2e04"
	base := serveA2A(t, a2asrv.NewHandler(echoAuth))
	p := pipetest.Start(t)
	log := &testkit.Buffer{}
	credPool(t, p, "echo", base, bridge.Credentials{APIKey: key}, log)
	a := p.Ask(t, "echo", `{"params":{"text":"hi"}}`)
	if got := a.Text(e2a.DeltaText); got != "done" {
		t.Errorf("text %q, want the answer", got)
	}
	if parts := statusParts(t, a.Frames); len(parts) != 1 || parts[0].Text() != "calling with Bearer [redacted]; " {
		t.Errorf("the status-update's message parts %v, want the status message with the key redacted", parts)
	}
	if n := natstest.StoredWith(t, p.JS, key, streams.ResponsesStream); n > 0 {
		t.Errorf("the bridge's key is stored in %d messages of E2A_RESPONSES", n)
	}
}

// credPool serves pool from the agent at url with credentials cr,
// logging to log.
func credPool(t *testing.T, p *pipetest.Pipeline, pool, url string, cr bridge.Credentials, log io.Writer) {
	t.Helper()
	ctx := context.Background()
	l := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	client, err := bridge.NewClient(url, bridge.WithCredentials(cr))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := bridge.OpenConversations(ctx, p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	u, err := a2abridge.New(ctx, client, a2abridge.WithConversations(pool, conv), a2abridge.WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	h, err := bridge.New(pool, u, bridge.WithLogger(l), bridge.WithRetry(1, time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool(pool, h)
}

// askWith posts an E2A request with a traceparent and waits for its
// answer.
func askWith(t *testing.T, p *pipetest.Pipeline, pool, body, traceparent string) pipetest.Answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, p.URL+"/pools/"+pool+"/v1/requests?wait=true", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a pipetest.Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || a.Final() == nil {
		t.Fatalf("answer %d: %v", resp.StatusCode, err)
	}
	return a
}

// header reads h case-insensitively (gRPC metadata keys are lower case).
func header(h http.Header, k string) string {
	for name, v := range h {
		if strings.EqualFold(name, k) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

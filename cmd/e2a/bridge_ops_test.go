package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// blockingAgent is an HTTP agent (the --http contract) whose POSTs wait
// for release before answering {"reply": "ok"}; each POST's request id is
// sent on calls as it arrives. A GET (the start's probe) answers at once.
func blockingAgent(t *testing.T) (srv *httptest.Server, calls <-chan string, release func()) {
	t.Helper()
	ch := make(chan string, 16)
	done := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			_, _ = io.WriteString(w, "ok")
			return
		}
		var env struct {
			RequestID string `json:"request_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		ch <- env.RequestID
		select {
		case <-done:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"reply":"ok"}`)
	}))
	closed := false
	release = func() {
		if !closed {
			closed = true
			close(done)
		}
	}
	t.Cleanup(func() { release(); srv.Close() })
	return srv, ch, release
}

// postAsync posts an E2A request to pool without waiting for its answer
// (202 Accepted).
func postAsync(t *testing.T, base, pool, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/pools/"+pool+"/v1/requests",
		strings.NewReader(`{"request_id":"`+id+`","params":{"text":"hi"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", id, resp.StatusCode, b)
	}
}

// TestOverBoundLeftToOtherWorkers: E2A_UPSTREAM_MAX_IN_FLIGHT
// bounds a worker's upstream calls and the requests its runtime pulls
// (--concurrency, 64 by default, is lowered to it): a request over the
// bound is left to another worker of the pool, never held (heartbeated,
// so never redelivered) by a saturated worker until a slot frees. Here
// worker A (bound 1) is busy with one call; a second request, then a
// second worker B: B gets the second request (the upstream sees its call
// while the first still runs).
func TestOverBoundLeftToOtherWorkers(t *testing.T) {
	upstream, calls, release := blockingAgent(t)
	dev := startDev(t, nil)
	base := dev.base
	agentEnv := joinEnv(dev.nats, "E2A_UPSTREAM_MAX_IN_FLIGHT=1")
	args := []string{"agent", "--pool", "slow", "--http", upstream.URL + "/agent"}

	_, errA := startBin(t, agentEnv, args...)
	waitLine(t, errA, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "slow")
	postAsync(t, base, "slow", "ops-bound-1")
	if id := waitCall(t, calls, 30*time.Second); id != "ops-bound-1" {
		t.Fatalf("first upstream call for %q", id)
	}
	// The second request is stored, and (on main) taken by A at once: A
	// pulls while it has runtime slots, whatever its bridge's bound.
	postAsync(t, base, "slow", "ops-bound-2")
	_, errB := startBin(t, agentEnv, args...)
	waitLine(t, errB, regexp.MustCompile(`agent pool running`))

	select {
	case id := <-calls:
		if id != "ops-bound-2" {
			t.Fatalf("second upstream call for %q", id)
		}
	case <-time.After(20 * time.Second):
		release()
		t.Fatalf("the second request did not reach the upstream in 20 s while worker B was idle: worker A (E2A_UPSTREAM_MAX_IN_FLIGHT=1, busy) holds it waiting for its only slot")
	}
	release()
}

// waitCall is the next upstream call's request id, within d.
func waitCall(t *testing.T, calls <-chan string, d time.Duration) string {
	t.Helper()
	select {
	case id := <-calls:
		return id
	case <-time.After(d):
		t.Fatalf("no upstream call in %v", d)
	}
	return ""
}

// probedUpstream is an HTTP upstream that answers "ok" and counts the
// calls made to it (probes, their methods), for a command that must not
// call it.
func probedUpstream(t *testing.T) (*httptest.Server, chan string) {
	t.Helper()
	probes := make(chan string, 8)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes <- r.Method
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	return upstream, probes
}

// TestRefusedBoundPublishesNoCard: a bridge pool whose
// E2A_UPSTREAM_* settings are refused (here E2A_UPSTREAM_MAX_IN_FLIGHT=0)
// fails at start (exit 1) before it tells clients of itself: no pool card
// in E2A_BRIDGE (the pipeline's card would list a pool no worker can
// serve) and no call to the upstream: the options are checked first
// (bridge.CheckOptions), before the upstream's probe and PublishPool.
func TestRefusedBoundPublishesNoCard(t *testing.T) {
	upstream, probes := probedUpstream(t)
	_, nc := natstest.RunServer(t)
	natsURL := nc.ConnectedUrl()

	code, _, errOut := runBin(t, joinEnv(natsURL, "E2A_UPSTREAM_MAX_IN_FLIGHT=0"),
		"agent", "--pool", "badbound", "--http", upstream.URL+"/agent")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errOut)
	}
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, found, err := bridge.LookupPool(ctx, js, "badbound")
	if err != nil {
		t.Fatal(err)
	}
	if found {
		t.Errorf("the refused pool's card is published: %+v (stderr: %s)", info, strings.TrimSpace(errOut))
	}
	if n := len(probes); n > 0 {
		t.Errorf("the upstream was called %d time(s) before the configuration was refused", n)
	}
}

// TestStartErrorHidesHeaderToken: an upstream that refuses the
// bridge's credentials at start (the probe of an OpenAI server's
// /models) fails `e2a agent` with exit 1 naming upstream_auth, and the
// message must not show the credential: here a bearer token given as
// E2A_UPSTREAM_HEADERS="Authorization: Bearer <token>", which the server's
// 401 quotes (without the scheme): the scrub takes the credential after
// the scheme out too.
func TestStartErrorHidesHeaderToken(t *testing.T) {
	const token = "tok-start-8d2c41f7a9e05b36"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+got+`","code":"invalid_api_key"}}`)
	}))
	defer upstream.Close()
	_, nc := natstest.RunServer(t)
	code, _, errOut := runBin(t, joinEnv(nc.ConnectedUrl(),
		"E2A_UPSTREAM_HEADERS=Authorization: Bearer "+token),
		"agent", "--pool", "llm", "--openai", upstream.URL+"/v1", "--model", "m")
	if code != 1 || !strings.Contains(errOut, "upstream_auth") {
		t.Fatalf("exit %d, want 1 naming upstream_auth: %s", code, errOut)
	}
	if strings.Contains(errOut, token) {
		t.Errorf("the start error shows the bearer token of E2A_UPSTREAM_HEADERS: %s", strings.TrimSpace(errOut))
	}
}

// TestStartRefusedCredentialsSaidSo: an upstream that answers 401 or 403
// when the bridge starts (an OpenAI server's model list, an A2A agent's
// card, an HTTP agent's URL) fails `e2a agent` saying it answered that
// status and that the credentials sent (named by their variable, never
// shown) were refused, or that none were sent. It said the upstream "does
// not answer", and for an A2A card nothing of the status.
func TestStartRefusedCredentialsSaidSo(t *testing.T) {
	const key = "sk-refused-5c1e9a07d24b"
	refusing := func(status int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error":"bad credentials"}`)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	_, nc := natstest.RunServer(t)
	env := joinEnv(nc.ConnectedUrl())
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"openai key", []string{"E2A_UPSTREAM_API_KEY=" + key}, []string{"--openai", refusing(401) + "/v1", "--model", "m"},
			[]string{"answered 401", "E2A_UPSTREAM_API_KEY", "refused", "/…"}},
		{"a2a header", []string{"E2A_UPSTREAM_HEADERS=X-Api-Key: " + key}, []string{"--a2a", refusing(403)},
			[]string{"answered 403", "E2A_UPSTREAM_HEADERS", "X-Api-Key", "refused"}},
		{"http none", nil, []string{"--http", refusing(401) + "/agent"},
			[]string{"answered 401", "no credentials", "E2A_UPSTREAM_API_KEY"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runBin(t, append(env, c.env...), append([]string{"agent", "--pool", "locked"}, c.args...)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1: %s", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("the start error does not say %q: %s", w, strings.TrimSpace(errOut))
				}
			}
			if strings.Contains(errOut, "does not answer") || strings.Contains(errOut, key) {
				t.Errorf("the start error says the upstream does not answer, or shows the key: %s", strings.TrimSpace(errOut))
			}
		})
	}
}

// TestNoModelListWarningURL: the warning that an OpenAI upstream serves no
// model list names the base URL as every upstream URL is shown (scheme and
// host, "/…" for a path or query: docs/security.md), never its path or
// query themselves, which may hold a token.
func TestNoModelListWarningURL(t *testing.T) {
	const token = "qs-token-77e0b1c4"
	upstream := httptest.NewServer(http.NotFoundHandler())
	defer upstream.Close()
	_, nc := natstest.RunServer(t)
	_, stderr := startBin(t, joinEnv(nc.ConnectedUrl(), "E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info"),
		"agent", "--pool", "nolist", "--openai", upstream.URL+"/api?access="+token, "--model", "m")
	m, _ := waitLine(t, stderr, regexp.MustCompile(`^.*no model list.*$`))
	if !strings.Contains(m[0], `"upstream":"`+upstream.URL+`/…"`) || strings.Contains(m[0], token) {
		t.Errorf("the warning does not name %s/… (without its path and query): %s", upstream.URL, m[0])
	}
}

// TestNoModelListWarnsOn2xx: the start check of an OpenAI upstream warns
// that its base URL has no model list when GET {URL}/models answers 2xx
// with something else than a list (a UI's web page, "{}", another API's
// object), as it does for a 404; a list, with or without the model asked
// for (or "object"), is taken silently. A 2xx was taken as a list
// whatever its body: `--openai http://host:3000` (Open WebUI's page, or
// a gateway's catch-all) started without a word, and every request then
// failed upstream_rejected.
func TestNoModelListWarnsOn2xx(t *testing.T) {
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		warn                    bool
		msg                     string // of the warning, when not "no model list at its base URL"
	}{
		{"404", "text/plain", "404 page not found", http.StatusNotFound, true, ""},
		{"405", "text/plain", "Method Not Allowed", http.StatusMethodNotAllowed, true, ""},
		{"500", "application/json", `{"error":{"message":"model loading"}}`, http.StatusInternalServerError, true, "with a server error"},
		{"503", "text/plain", "starting", http.StatusServiceUnavailable, true, "with a server error"},
		{"empty object", "application/json", `{}`, http.StatusOK, true, ""},
		{"web page", "text/html", "<!doctype html><html><head><title>Open WebUI</title></head></html>", http.StatusOK, true, ""},
		{"data null", "application/json", `{"object":"list","data":null}`, http.StatusOK, true, ""},
		{"another object", "application/json", `{"object":"model","data":[{"id":"m"}]}`, http.StatusOK, true, ""},
		{"no body", "", "", http.StatusNoContent, true, ""},
		{"list", "application/json", `{"object":"list","data":[{"id":"m","object":"model"}]}`, http.StatusOK, false, ""},
		{"list without the model", "application/json", `{"object":"list","data":[{"id":"other","object":"model"}]}`, http.StatusOK, false, ""},
		{"list without object", "application/json", `{"data":[{"id":"m","type":"model"}],"has_more":false}`, http.StatusOK, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" {
					http.NotFound(w, r)
					return
				}
				if c.contentType != "" {
					w.Header().Set("Content-Type", c.contentType)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			defer upstream.Close()
			client, err := bridge.NewClient(upstream.URL + "/v1")
			if err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			u := UpstreamConfig{Kind: upstreamOpenAI, URL: upstream.URL + "/v1", Model: "m", ConnectTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
			if err := probeUpstream(context.Background(), client, u, nil, log); err != nil {
				t.Fatalf("probeUpstream: %v", err)
			}
			warned := strings.Contains(logs.String(), cmp.Or(c.msg, "no model list at its base URL"))
			if warned != c.warn || warned && !strings.Contains(logs.String(), fmt.Sprintf(`"status":%d`, c.status)) {
				t.Errorf("GET /v1/models answering %d %q: warned %v, want %v (with its status): %s", c.status, c.body, warned, c.warn, logs.String())
			}
		})
	}
}

// TestStartUnreachableSaysWhatWasTried: an upstream nobody listens on
// fails `e2a agent` at start naming the upstream, the call tried, the
// code and the network's error, once; it said "bridge: upstream_unreachable:
// upstream unreachable: …", the code and its words twice, and not which
// call.
func TestStartUnreachableSaysWhatWasTried(t *testing.T) {
	port := natstest.FreePorts(t, 1)[0] // free: nothing listens there
	_, nc := natstest.RunServer(t)
	code, _, errOut := runBin(t, joinEnv(nc.ConnectedUrl()),
		"agent", "--pool", "llm", "--openai", fmt.Sprintf("http://127.0.0.1:%d/v1", port), "--model", "m")
	want := fmt.Sprintf("the openai upstream http://127.0.0.1:%d/… does not answer (GET models): upstream_unreachable: Get ", port)
	if code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "upstream_unreachable: upstream unreachable") {
		t.Errorf("exit %d, want 1 with %q said once: %s", code, want, errOut)
	}
	// An A2A agent's card alike: it said "a2abridge: agent card of …:
	// bridge: upstream_unreachable: upstream unreachable: card request
	// failed: …".
	code, _, errOut = runBin(t, joinEnv(nc.ConnectedUrl()), "agent", "--pool", "a2", "--a2a", fmt.Sprintf("http://127.0.0.1:%d", port))
	want = fmt.Sprintf("the a2a upstream http://127.0.0.1:%d does not answer (a GET of its agent card): upstream_unreachable: Get ", port)
	if code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "upstream unreachable") || strings.Contains(errOut, "card request failed") {
		t.Errorf("--a2a: exit %d, want 1 with %q said once: %s", code, want, errOut)
	}
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/proctest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestAgentBridgeArgs: a bridge's arguments are checked before anything
// starts: two upstreams, an OpenAI upstream without a model, an unknown
// kind are usage errors (exit 2, the command's help); a URL that is not
// http(s) fails at once (exit 1) naming the problem (one without its
// scheme, the usual slip, how to write it). An AckWait under the
// agent runtime's 1 s is a usage error from --ack-wait, a configuration
// error (exit 1) from E2A_AGENT_ACK_WAIT for any command.
func TestAgentBridgeArgs(t *testing.T) {
	env := embeddedEnv()
	for _, c := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{nil, []string{"agent", "--pool", "p", "--openai", "http://x/v1", "--http", "http://y"}, 2, "give one of --a2a, --openai and --http"},
		{nil, []string{"agent", "--pool", "p", "--openai", "http://x/v1"}, 2, "needs a model"},
		{[]string{"E2A_UPSTREAM_KIND=grpc", "E2A_UPSTREAM_URL=http://x"}, []string{"agent", "--pool", "p"}, 2, `E2A_UPSTREAM_KIND "grpc"`},
		{[]string{"E2A_UPSTREAM_KIND=http"}, []string{"agent", "--pool", "p"}, 2, "needs a URL"},
		{nil, []string{"agent", "--pool", "p", "--http", "ftp://x/agent"}, 1, "absolute http or https URL"},
		{nil, []string{"agent", "--pool", "p", "--http", "127.0.0.1:8001"}, 1, "has no scheme (want http://host[:port][/path]"},
		{nil, []string{"agent", "--pool", "p", "--http", "http://user:pw@x/agent"}, 1, "holds credentials"},
		{[]string{"E2A_UPSTREAM_HEADERS=X-Key secret"}, []string{"agent", "--pool", "p", "--http", "http://x/agent"}, 1, "E2A_UPSTREAM_HEADERS"},
		{nil, []string{"agent", "--pool", "demo", "--ack-wait", "100ms"}, 2, "--ack-wait 100ms: at least 1s"},
		{[]string{"E2A_AGENT_ACK_WAIT=500ms"}, []string{"agent", "--pool", "demo"}, 1, "E2A_AGENT_ACK_WAIT (500ms) must be 0 (the agent runtime's default) or at least 1s"},
		{[]string{"E2A_AGENT_ACK_WAIT=500ms"}, []string{"dev"}, 1, "E2A_AGENT_ACK_WAIT (500ms)"},
	} {
		code, _, errOut := runBin(t, append(append([]string{}, env...), c.env...), c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v %v: exit %d, stderr:\n%s", c.env, c.args, code, errOut)
		}
		if strings.Contains(errOut, "secret") || strings.Contains(errOut, "pw@") {
			t.Errorf("%v %v: a credential in the error: %s", c.env, c.args, errOut)
		}
	}
}

// TestAgentBridgeOpenAI: `e2a agent --pool llm --openai URL --model M`
// beside `e2a dev` serves the pool from an OpenAI-compatible server (a
// recorded chat completions stream): the pool's own endpoint answers with
// the model's text, its card is named after the configuration, the API key
// reaches the upstream as a bearer token and appears in neither process's
// output.
func TestAgentBridgeOpenAI(t *testing.T) {
	const key = "sk-test-4f9c2b1e77d0"
	upstream, auth := openAIFixture(t, key)

	dev := startDev(t, nil)
	base, natsURL := dev.base, dev.nats
	// Checked at start: no server at the URL, or a key the server refuses,
	// fails the command at once (exit 1), naming it, the key never printed.
	dead := "http://127.0.0.1:" + strconv.Itoa(natstest.FreePorts(t, 1)[0]) + "/v1"
	for _, c := range []struct{ url, key, want string }{
		{dead, key, "upstream_unreachable"},
		{upstream.URL + "/v1", "sk-wrong-0d1e2f3a4b5c", "upstream_auth"},
	} {
		code, _, errOut := runBin(t, joinEnv(natsURL, "E2A_UPSTREAM_API_KEY="+c.key),
			"agent", "--pool", "llm", "--openai", c.url, "--model", "test-model")
		if code != 1 || !strings.Contains(errOut, "the openai upstream") || !strings.Contains(errOut, c.want) || strings.Contains(errOut, c.key) {
			t.Errorf("--openai %s: exit %d, want 1 naming %s without the key: %s", c.url, code, c.want, errOut)
		}
	}
	// A base URL without its /v1 (the usual slip with Ollama or vLLM):
	// a server is there, so the pool starts, warning that {URL}/models
	// was not found.
	_, slipErr := startBin(t, joinEnv(natsURL, "E2A_UPSTREAM_API_KEY="+key),
		"agent", "--pool", "slip", "--openai", upstream.URL, "--model", "test-model")
	waitLine(t, slipErr, regexp.MustCompile(`no model list at its base URL.*status"?[:=]404`))
	_, agentErr := startBin(t, joinEnv(natsURL, "E2A_UPSTREAM_API_KEY="+key,
		"E2A_UPSTREAM_NAME=Test Model", "E2A_LOG_LEVEL=debug"),
		"agent", "--pool", "llm", "--openai", upstream.URL+"/v1", "--model", "test-model")
	waitLine(t, agentErr, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "llm")

	var card struct {
		Name string `json:"name"`
	}
	testkit.Eventually(t, 30*time.Second, "the pool's card", func() bool {
		code, body := httpGet(t, base+"/pools/llm/.well-known/agent-card.json")
		return code == 200 && json.Unmarshal([]byte(body), &card) == nil
	})
	if card.Name != "Test Model" {
		t.Errorf("pool card name %q", card.Name)
	}
	resp, err := http.Post(base+"/pools/llm/v1/requests?wait=true", "application/json", strings.NewReader(`{"params":{"text":"hello"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		State  string            `json:"state"`
		Frames []json.RawMessage `json:"frames"`
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got.Frames) < 2 {
		t.Fatalf("answer %d: %s", resp.StatusCode, b)
	}
	if !strings.Contains(string(got.Frames[len(got.Frames)-1]), `"e2a.complete"`) {
		t.Errorf("last frame is not e2a.complete: %s", got.Frames[len(got.Frames)-1])
	}
	if a := (<-auth).Auth; a != "Bearer "+key {
		t.Errorf("upstream got Authorization %q", a)
	}
	if strings.Contains(string(b), key) {
		t.Error("the API key is in the request's frames")
	}
	noSecretInLines(t, key, dev.stderr, agentErr)
}

// noSecretInLines fails t for each line the channels hold now (a
// started process's output read so far) that contains secret.
func noSecretInLines(t *testing.T, secret string, chans ...<-chan string) {
	t.Helper()
	for _, ch := range chans {
		for done := false; !done; {
			select {
			case l := <-ch:
				if strings.Contains(l, secret) {
					t.Errorf("the secret is in an output line: %s", l)
				}
			default:
				done = true
			}
		}
	}
}

// TestAgentBridgeHTTP: `e2a agent --pool py --http URL` beside `e2a dev`
// serves the pool from the README's Python example.
func TestAgentBridgeHTTP(t *testing.T) {
	port := proctest.Start(t, proctest.Python3(t), "../../examples/httpagent/agent.py", "0")
	dev := startDev(t, nil)
	base, natsURL := dev.base, dev.nats
	// No server at the URL fails the command at start (exit 1), naming it.
	dead := "http://127.0.0.1:" + strconv.Itoa(natstest.FreePorts(t, 1)[0]) + "/"
	code, _, errOut := runBin(t, joinEnv(natsURL), "agent", "--pool", "py", "--http", dead)
	if code != 1 || !strings.Contains(errOut, "the http upstream") || !strings.Contains(errOut, "upstream_unreachable") {
		t.Errorf("--http %s: exit %d, want 1 naming upstream_unreachable: %s", dead, code, errOut)
	}
	// The example answers a GET (the start's check): it is there.
	_, agentErr := startBin(t, joinEnv(natsURL),
		"agent", "--pool", "py", "--http", "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	waitLine(t, agentErr, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "py")
	resp, err := http.Post(base+"/pools/py/v1/requests?wait=true", "application/json", strings.NewReader(`{"params":{"text":"hi there"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"Python `) || !strings.Contains(string(b), `"words":2`) {
		t.Errorf("answer %d: %s", resp.StatusCode, b)
	}
	// E2A_UPSTREAM_MAX_ANSWER_BYTES reaches the bridge: an answer of more
	// (the example's words of a 3,000-byte text) ends not retryable.
	_, smallErr := startBin(t, joinEnv(natsURL, "E2A_UPSTREAM_MAX_ANSWER_BYTES=1024"),
		"agent", "--pool", "pysmall", "--http", "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	waitLine(t, smallErr, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "pysmall")
	resp, err = http.Post(base+"/pools/pysmall/v1/requests?wait=true", "application/json",
		strings.NewReader(`{"params":{"text":"`+strings.Repeat("word ", 600)+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"upstream_protocol_error"`) || strings.Contains(string(b), `"words":600`) {
		t.Errorf("an answer over E2A_UPSTREAM_MAX_ANSWER_BYTES=1024: %d %s; want upstream_protocol_error", resp.StatusCode, b)
	}
}

// waitPoolLive waits until /readyz reports a worker of pool pulling.
func waitPoolLive(t *testing.T, base, pool string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "pool "+pool+" live in /readyz", func() bool {
		var ready struct {
			Details struct {
				Pools map[string]string `json:"pools"`
			} `json:"details"`
		}
		_, body := httpGet(t, base+"/readyz")
		return json.Unmarshal([]byte(body), &ready) == nil && ready.Details.Pools[pool] == "live"
	})
}

// TestAgentBridgeA2A: `e2a agent --pool travel --a2a URL` beside `e2a dev`
// serves the pool from a real A2A agent (a2a-go/v2's server); the pool's
// card carries the agent's own name and skills. An A2A URL where no agent
// answers fails at start, naming it.
func TestAgentBridgeA2A(t *testing.T) {
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	dev := startDev(t, nil)
	base, natsURL := dev.base, dev.nats

	dead := natstest.FreePorts(t, 1)[0]
	code, _, errOut := runBin(t, joinEnv(natsURL, "E2A_UPSTREAM_CONNECT_TIMEOUT=2s"),
		"agent", "--pool", "nobody", "--a2a", "http://127.0.0.1:"+strconv.Itoa(dead))
	if code != 1 || !strings.Contains(errOut, "agent card") || !strings.Contains(errOut, "upstream_unreachable") {
		t.Errorf("unreachable A2A agent: exit %d: %s", code, errOut)
	}

	_, agentErr := startBin(t, joinEnv(natsURL),
		"agent", "--pool", "travel", "--a2a", srv.CardURL())
	waitLine(t, agentErr, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "travel")
	var card struct {
		Name   string `json:"name"`
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	}
	code2, body := httpGet(t, base+"/pools/travel/.well-known/agent-card.json")
	if code2 != 200 || json.Unmarshal([]byte(body), &card) != nil || card.Name != srv.Card().Name || len(card.Skills) != len(srv.Card().Skills) {
		t.Errorf("pool card %d: %s (agent's name %q)", code2, body, srv.Card().Name)
	}
	resp, err := http.Post(base+"/pools/travel/v1/requests?wait=true", "application/json", strings.NewReader(`{"params":{"text":"stream: Lisbon"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Lisbon") || !strings.Contains(string(b), `"e2a.complete"`) {
		t.Errorf("answer %d: %s", resp.StatusCode, b)
	}
}

// chatCall is a chat completions call an openAIFixture received.
type chatCall struct {
	Auth string // its Authorization header
	Body string
}

// openAIFixture serves bridge/openai's recorded text stream (text.sse,
// fixtureReply) as an OpenAI-compatible server under /v1 that takes key
// alone as its bearer token, with a model list; calls yields each chat
// completions call (the first 16).
func openAIFixture(t *testing.T, key string) (upstream *httptest.Server, calls <-chan chatCall) {
	t.Helper()
	fixture, err := os.ReadFile("../../bridge/openai/testdata/text.sse")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan chatCall, 16)
	upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/v1/models" {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"test-model","object":"model"}]}`)
			return
		}
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- chatCall{Auth: r.Header.Get("Authorization"), Body: string(body)}:
		default:
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(fixture)
	}))
	t.Cleanup(upstream.Close)
	return upstream, got
}

// fixtureReply is the model's answer in openAIFixture's stream.
const fixtureReply = "Hello! How can I help you today?"

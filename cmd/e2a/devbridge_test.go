package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/agent/tck"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestDevBridgeArgs: `e2a dev`'s bridge flags are checked before anything
// starts: a flag that needs an upstream without one, a pool dev serves
// itself, two upstreams, an OpenAI upstream without a model are usage
// errors (exit 2, with the help); an upstream that is not there ends the
// command at start (exit 1), naming the pool and the failure.
func TestDevBridgeArgs(t *testing.T) {
	ports := natstest.FreePorts(t, 2)
	own := strconv.Itoa(ports[1])
	env := []string{"E2A_NATS_URL=", "E2A_NATS_PORT=0", "E2A_HTTP_ADDR=127.0.0.1:" + own}
	dead := "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/"
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dev", "--model", "m"}, 2, "--model goes with an upstream: --a2a, --openai or --http"},
		{[]string{"dev", "--pool", "travel"}, 2, "--pool goes with an upstream"},
		{[]string{"dev", "--pool", "demo", "--http", dead}, 2, `--pool "demo": e2a dev serves that pool itself`},
		{[]string{"dev", "--pool", "workflow", "--http", dead}, 2, `--pool "workflow": e2a dev serves that pool itself`},
		{[]string{"dev", "--pool", "a.b", "--http", dead}, 2, `--pool "a.b": an agent pool is`},
		{[]string{"dev", "--http", dead, "--a2a", dead}, 2, "give one of --a2a, --openai and --http"},
		{[]string{"dev", "--openai", dead}, 2, "needs a model"},
		{[]string{"dev", "--http", dead}, 1, "pool agent: the http upstream"},
		{[]string{"dev", "--pool", "py", "--http", dead}, 1, "upstream_unreachable"},
		{[]string{"dev", "--a2a", "http://localhost:" + own}, 2, "is this e2a dev's own address"},
	} {
		code, out, errOut := runBin(t, env, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("e2a %v: exit %d, stderr:\n%s\nwant exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
		if c.code == 2 && !strings.Contains(errOut, "Usage: e2a dev") {
			t.Errorf("e2a %v: no help with the usage error:\n%s", c.args, errOut)
		}
		if strings.Contains(out, "is running") {
			t.Errorf("e2a %v: the pipeline started: %s", c.args, out)
		}
	}
}

// TestDevLayout: with a bridged pool, `e2a dev` makes it the default pool
// and serves the demo agent as "demo", unless E2A_DEFAULT_POOL names
// another pool, which then stays the default; no pool is served twice.
func TestDevLayout(t *testing.T) {
	bridged := &devPool{name: "llm", what: "the model m at http://…"}
	for _, c := range []struct {
		name        string
		def         string
		set         bool
		bridged     *devPool
		wantDefault string
		wantNames   []string
	}{
		{"no bridge", "demo", false, nil, "demo", []string{"demo", tck.Pool, tck.BasicPool}},
		{"no bridge, another default", "travel", true, nil, "travel", []string{"travel", tck.Pool, tck.BasicPool}},
		{"bridge", "demo", false, bridged, "llm", []string{"llm", "demo", tck.Pool, tck.BasicPool}},
		{"bridge, E2A_DEFAULT_POOL=demo", "demo", true, bridged, "demo", []string{"demo", tck.Pool, tck.BasicPool, "llm"}},
		{"bridge, E2A_DEFAULT_POOL=llm", "llm", true, bridged, "llm", []string{"llm", "demo", tck.Pool, tck.BasicPool}},
		{"bridge, E2A_DEFAULT_POOL=tck", tck.Pool, true, bridged, tck.Pool, []string{tck.Pool, tck.BasicPool, "llm"}},
	} {
		pools, def, err := devLayout(c.def, c.set, c.bridged)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var names []string
		for _, p := range pools {
			names = append(names, p.name)
			if _, isDemo := p.h.(demo.Agent); isDemo && c.bridged != nil && p.name == c.bridged.name {
				t.Errorf("%s: the demo agent serves the bridged pool %q", c.name, p.name)
			}
		}
		if def != c.wantDefault || strings.Join(names, " ") != strings.Join(c.wantNames, " ") {
			t.Errorf("%s: default %q, pools %v; want %q, %v", c.name, def, names, c.wantDefault, c.wantNames)
		}
		if line := poolsLine(pools); c.bridged != nil && !strings.Contains(line, `"llm" (the model m at http://…`) {
			t.Errorf("%s: banner %s", c.name, line)
		}
		// The console's demo form (frames, delay_ms) goes to the demo
		// agent, not to a bridged default pool.
		if got := demoPoolOf(pools, def); c.bridged != nil && got == c.bridged.name {
			t.Errorf("%s: the console's demo form goes to the bridged pool %q", c.name, got)
		}
	}
}

// TestDevBridgeOpenAI: `e2a dev --openai URL --model M` runs the whole
// pipeline with the model as its default pool, "agent", in one command:
// /v1/requests and the A2A door at the root are answered by the model
// (the API key reaching it as a bearer token, in no output; a2a-go/v2's
// client given the root card), the demo
// agent still answers as "demo", and the banner names the pool.
func TestDevBridgeOpenAI(t *testing.T) {
	const key = "sk-test-dev-7c1d2e3f4a5b"
	upstream, auth := openAIFixture(t, key)
	dev := startDev(t, []string{"E2A_UPSTREAM_API_KEY=" + key}, "--openai", upstream.URL+"/v1", "--model", "test-model")
	base, stderr := dev.base, dev.stderr
	_, rest := waitLine(t, dev.stdout, regexp.MustCompile(`^Ctrl-C stops`))
	banner := append(dev.banner, rest...)
	if want := `"agent" (the model test-model at http://127.0.0.1:` + strings.TrimPrefix(upstream.URL, "http://127.0.0.1:"); !strings.Contains(strings.Join(banner, "\n"), want) ||
		!strings.Contains(strings.Join(banner, "\n"), `"demo" (demo)`) {
		t.Errorf("banner lacks the bridged pool (%s) or the demo one:\n%s", want, strings.Join(banner, "\n"))
	}
	waitPoolLive(t, base, "agent")

	resp, b := testkit.Do(t, http.MethodPost, base+"/v1/requests?wait=true", `{"params":{"text":"hello"}}`)
	var got struct {
		State  string            `json:"state"`
		Frames []json.RawMessage `json:"frames"`
	}
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 || got.State != "succeeded" || !strings.Contains(string(b), `"Hello`) {
		t.Fatalf("the default pool's answer %d: %s", resp.StatusCode, b)
	}
	if !strings.Contains(string(b), `"pool":"agent"`) {
		t.Errorf("the answer is not the bridged pool's: %s", b)
	}
	if a := (<-auth).Auth; a != "Bearer "+key {
		t.Errorf("upstream got Authorization %q", a)
	}
	// a2a-go/v2's client, given only the pipeline's root card: the model's
	// answer as the agent's message.
	if v := up.Send(t, up.Client(t, base), up.Msg("hi")); v.Message == nil || turnText(v) != fixtureReply {
		t.Errorf("A2A v1.0 at the root: message %v, text %q, want the message %q", v.Message != nil, turnText(v), fixtureReply)
	}
	resp, b = testkit.Do(t, http.MethodPost, base+"/pools/demo/v1/requests?wait=true", `{"params":{"text":"hi","frames":1}}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"pool":"demo"`) || strings.Contains(string(b), `"Hello`) {
		t.Errorf("the demo pool: %d %s", resp.StatusCode, b)
	}
	testkit.Eventually(t, 10*time.Second, "the pool's card", func() bool {
		code, body := httpGet(t, base+"/pools/agent/.well-known/agent-card.json")
		return code == 200 && strings.Contains(body, "test-model")
	})
	noSecretInLines(t, key, dev.stdout, stderr)
}

// TestDevBridgeA2A: `e2a dev --a2a URL` with an a2a-go/v2 server as the
// agent: a2a-go/v2's client, given only the pipeline's root card, streams
// an answer and plays an interrupted task (input-required, then the
// answer on the same task) through the pipeline to the agent.
func TestDevBridgeA2A(t *testing.T) {
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	dev := startDev(t, nil, "--pool", "travel", "--a2a", srv.CardURL())
	base := dev.base
	waitLine(t, dev.stdout, regexp.MustCompile(`agent pools "travel" \(the A2A agent at http://127\.0\.0\.1:\d+`))
	waitPoolLive(t, base, "travel")
	c := up.Client(t, base)
	ctx := context.Background()
	v := up.Collect(t, c.SendStreamingMessage(ctx, up.Msg(up.Stream+": Lisbon")), nil)
	if v.State() != a2a.TaskStateCompleted || !strings.Contains(turnText(v), up.StreamText("Lisbon")) {
		t.Errorf("streamed: states %v, text %q, want completed with %q", v.States, turnText(v), up.StreamText("Lisbon"))
	}
	first := up.Asked(t, ctx, c, up.Msg(up.Ask+": hi"))
	second := up.Send(t, c, up.Reply(first, "Ada"))
	if second.State() != a2a.TaskStateCompleted || !strings.Contains(turnText(second), up.AskReply("Ada")) {
		t.Errorf("the answer's turn: states %v, text %q, want completed with %q", second.States, turnText(second), up.AskReply("Ada"))
	}
}

// turnText is the text of a turn's artifacts and direct message.
func turnText(v *up.Turn) string {
	var b strings.Builder
	for _, a := range v.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text())
		}
	}
	if v.Message != nil {
		for _, p := range v.Message.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// TestOwnAddress: the upstream URLs that name dev's own listener (same
// port, a loopback or the listener's own host, any local address of an
// unspecified listener), and those that do not.
func TestOwnAddress(t *testing.T) {
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	for _, c := range []struct {
		url  string
		addr string
		want bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"http://localhost:8080/pools/demo/", "127.0.0.1:8080", true},
		{"http://[::1]:8080", "127.0.0.1:8080", true},
		{"http://127.0.0.1:8080", "0.0.0.0:8080", true},
		{"http://127.0.0.1:8081", "127.0.0.1:8080", false},
		{"http://localhost", "127.0.0.1:80", true},
		{"https://localhost", "127.0.0.1:80", false},
		{"http://10.255.255.1:8080", "0.0.0.0:8080", false},
		{"http://10.255.255.1:8080", "127.0.0.1:8080", false},
		{"http://agent.example:8080", "0.0.0.0:8080", false},
		{"::not a url", "127.0.0.1:8080", false},
	} {
		if got := ownAddress(c.url, tcp(c.addr)); got != c.want {
			t.Errorf("ownAddress(%q, %s) = %v, want %v", c.url, c.addr, got, c.want)
		}
	}
}

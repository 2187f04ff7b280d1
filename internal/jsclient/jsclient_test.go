package jsclient

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// summary is what client.mjs prints.
type summary struct {
	SendText     string   `json:"send_text"`
	StreamEvents int      `json:"stream_events"`
	StreamText   string   `json:"stream_text"`
	StreamStates []string `json:"stream_states"`
	TaskID       string   `json:"task_id"`
	GetState     string   `json:"get_state"`
	GetText      string   `json:"get_text"`
	Listed       *bool    `json:"listed"`
	// card's
	Requirements []map[string]map[string]map[string][]string `json:"security_requirements"`
	Schemes      []string                                    `json:"security_schemes"`
	Extensions   []string                                    `json:"extensions"`
}

// pipeline serves ingress (with opts) + egress over loopback HTTP with
// the demo agent on an embedded JetStream server, and returns its base URL.
func pipeline(t *testing.T, opts ...ingress.Option) string {
	t.Helper()
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	srv := pipetest.ServeFront(t, nc, []egress.Option{egress.WithRegisterer(reg)}, append(opts, ingress.WithRegisterer(reg))...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, nc, demo.Pool, demo.New())
	}()
	t.Cleanup(func() { cancel(); <-done })
	return srv.URL
}

// installed makes sure the pinned packages are in node_modules.
func installed(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		const how = "install Node.js ≥ 20 (Debian: apt-get install nodejs npm; .ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatal("node not found and CI=true: the JavaScript client test must run in CI; " + how)
		}
		t.Skip("node not found: " + how)
	}
	if _, err := os.Stat("node_modules/@a2a-js/sdk/package.json"); err == nil {
		if _, err := os.Stat("node_modules/a2a-js-sdk-03/package.json"); err == nil {
			return
		}
	}
	out, err := exec.Command("npm", "ci", "--no-audit", "--no-fund").CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

func run(t *testing.T, args ...string) summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"client.mjs"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs %v: %v\n%s", args, err, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	return s
}

// TestA2AJavaScriptClients: @a2a-js/sdk 1.3.0's default client over both
// v1.0 bindings and 0.3.14's over v0.3 resolve the card and send, stream
// and get a task (v1.0 also lists it), with the demo agent's reply intact.
func TestA2AJavaScriptClients(t *testing.T) {
	installed(t)
	base := pipeline(t)
	for _, tc := range []struct {
		name                  string
		args                  []string
		first, last, finished string
	}{
		{"sdk-1.3.0/JSONRPC", []string{base, "v1", "JSONRPC"}, "TASK_STATE_SUBMITTED", "TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED"},
		{"sdk-1.3.0/HTTP+JSON", []string{base, "v1", "HTTP+JSON"}, "TASK_STATE_SUBMITTED", "TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED"},
		{"sdk-0.3.14/JSONRPC", []string{base, "v03"}, "submitted", "completed", "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := run(t, tc.args...)
			if !strings.Contains(s.SendText, "You said: hello from js") {
				t.Errorf("sendMessage text %q", s.SendText)
			}
			if !strings.Contains(s.StreamText, "You said: stream from js") || s.StreamEvents < 3 {
				t.Errorf("stream: %d events, text %q", s.StreamEvents, s.StreamText)
			}
			if n := len(s.StreamStates); n < 2 || s.StreamStates[0] != tc.first || s.StreamStates[n-1] != tc.last {
				t.Errorf("stream states %v, want %s … %s", s.StreamStates, tc.first, tc.last)
			}
			if s.TaskID == "" || s.GetState != tc.finished || !strings.Contains(s.GetText, "You said: stream from js") {
				t.Errorf("getTask %s: state %s, artifacts text %q", s.TaskID, s.GetState, s.GetText)
			}
			if s.Listed != nil && !*s.Listed {
				t.Errorf("listTasks does not list task %s", s.TaskID)
			}
		})
	}
}

// TestA2AJavaScriptCardScopes: @a2a-js/sdk 1.3.0's card resolver reads
// the pipeline's card with authentication (API key, and OAuth 2.0 with
// the scope agents) whole: every requirement, with its scopes. Its
// parser takes each scheme's scopes from the specification's
// {"list": [...]} and reads the Go SDK's bare list as no scopes, so the
// oauth2 requirement came without its scope before the card gave every
// client but Go's the specification's form.
func TestA2AJavaScriptCardScopes(t *testing.T) {
	installed(t)
	s := run(t, pipeline(t, ingress.WithAuth(keyAndOAuth(t))), "card")
	checkScopes(t, s)
}

// aliceKey is alice's API key in keyAndOAuth.
const aliceKey = "key_alice_0123456789abcdef"

// keyAndOAuth is authentication by API key (alice's) or OAuth 2.0 with
// the scope agents.
func keyAndOAuth(t *testing.T) *ingress.Auth {
	t.Helper()
	return pipetest.KeyAndOAuth(t, map[string]string{"alice": aliceKey})
}

// checkScopes checks the card s read has keyAndOAuth's requirements whole.
func checkScopes(t *testing.T, s summary) {
	t.Helper()
	got, _ := json.Marshal(s.Requirements)
	const want = `[{"schemes":{"apiKey":{"list":[]}}},{"schemes":{"oauth2":{"list":["agents"]}}}]`
	if string(got) != want || strings.Join(s.Schemes, ",") != "apiKey,oauth2" {
		t.Errorf("requirements %s, schemes %v; want %s, apiKey,oauth2", got, s.Schemes, want)
	}
}

// TestA2AJavaScriptExtendedCardScopes: @a2a-js/sdk 1.3.0's getAgentCard
// (GetExtendedAgentCard, over JSON-RPC and HTTP+JSON, with alice's key)
// reads the extended card's requirements whole, as the public card's
// (TestA2AJavaScriptCardScopes): the SDK's server wrote the Go SDK's bare
// lists, which this client read as no scopes.
func TestA2AJavaScriptExtendedCardScopes(t *testing.T) {
	installed(t)
	base := pipeline(t, ingress.WithAuth(keyAndOAuth(t)))
	for _, binding := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(binding, func(t *testing.T) {
			s := run(t, base, "extcard", binding, aliceKey)
			if !slices.Contains(s.Extensions, ingress.PrincipalExtension) {
				t.Fatalf("extensions %v: not the extended card (no %s)", s.Extensions, ingress.PrincipalExtension)
			}
			checkScopes(t, s)
		})
	}
}

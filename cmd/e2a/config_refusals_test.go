package main

// Review of the configuration (session 44): values that were accepted and
// meant something else, or refused late by an option's own name where the
// operator needs the variable's or the flag's. Each test says what it
// failed on before the fix.

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestConfigRefusedNamingVariable: each value is refused by
// LoadConfig, at start, with an error naming its variable. Before:
// E2A_HTTP_ADDR set but empty (an empty ConfigMap value, `E2A_HTTP_ADDR=`
// in an env file) was taken as ":0", and `e2a dev` served the unauthenticated
// pipeline on every interface at a random port instead of the loopback
// default; E2A_NATS_PORT=70000 or -1 failed only when the embedded server
// listened ("embedded NATS on 127.0.0.1:70000: … invalid port");
// E2A_MAX_BODY_BYTES=0, E2A_DEFAULT_POOL=a.b and an empty E2A_DEFAULT_POOL
// only once the streams were provisioned, as ingress's option ("ingress:
// max body bytes must be > 0", "invalid agent pool"); E2A_LOG_LEVEL and
// E2A_LOG_FORMAT as "obs: log level …", and E2A_LOG_FORMAT set but empty
// was taken as json while an empty E2A_LOG_LEVEL was refused; the NATS connection's settings only
// when connecting, as "negative reconnect setting", "password without
// user", "TLS certificate and key go together", a credentials, nkey or
// TLS file missing as nats.go's "open /c.creds: no such file or directory".
func TestConfigRefusedNamingVariable(t *testing.T) {
	for _, c := range []struct {
		env  []string
		name string
	}{
		{[]string{"E2A_HTTP_ADDR="}, "E2A_HTTP_ADDR"},
		{[]string{"E2A_HTTP_ADDR= "}, "E2A_HTTP_ADDR"},
		{[]string{"E2A_NATS_PORT=70000"}, "E2A_NATS_PORT"},
		{[]string{"E2A_NATS_PORT=-1"}, "E2A_NATS_PORT"},
		{[]string{"E2A_MAX_BODY_BYTES=0"}, "E2A_MAX_BODY_BYTES"},
		{[]string{"E2A_MAX_BODY_BYTES=-1"}, "E2A_MAX_BODY_BYTES"},
		{[]string{"E2A_DEFAULT_POOL="}, "E2A_DEFAULT_POOL"},
		{[]string{"E2A_DEFAULT_POOL=a.b"}, "E2A_DEFAULT_POOL"},
		{[]string{"E2A_LOG_LEVEL=verbose"}, "E2A_LOG_LEVEL"},
		{[]string{"E2A_LOG_FORMAT=xml"}, "E2A_LOG_FORMAT"},
		// Set but empty: E2A_LOG_FORMAT= was taken as json while
		// E2A_LOG_LEVEL= was refused.
		{[]string{"E2A_LOG_FORMAT="}, "E2A_LOG_FORMAT is set but empty: want json or text"},
		{[]string{"E2A_LOG_LEVEL="}, "E2A_LOG_LEVEL is set but empty: want debug, info, warn or error"},
		{[]string{"E2A_NATS_RECONNECT_WAIT=-1s"}, "E2A_NATS_RECONNECT_WAIT"},
		{[]string{"E2A_NATS_PING_INTERVAL=-1s"}, "E2A_NATS_PING_INTERVAL"},
		{[]string{"E2A_NATS_RECONNECT_BUFFER=-5"}, "E2A_NATS_RECONNECT_BUFFER"},
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1", "E2A_NATS_PASSWORD=hunter2-secret"}, "E2A_NATS_USER"},
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1", "E2A_NATS_TLS_CERT=/etc/tls.crt"}, "E2A_NATS_TLS_KEY"},
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1", "E2A_NATS_USER=u", "E2A_NATS_CREDS=/c.creds"}, "E2A_NATS_CREDS"},
		// A file missing: nats.go's "open /c.creds: no such file or
		// directory" when connecting named no variable.
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1", "E2A_NATS_CREDS=/c.creds"}, "E2A_NATS_CREDS"},
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1", "E2A_NATS_NKEY=/user.nk"}, "E2A_NATS_NKEY"},
		{[]string{"E2A_NATS_URL=nats://127.0.0.1:1", "E2A_NATS_TLS_CA=/ca.pem"}, "E2A_NATS_TLS_CA"},
	} {
		t.Run(strings.Join(c.env, ","), func(t *testing.T) {
			for _, kv := range c.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			_, err := LoadConfig()
			if err == nil || !strings.Contains(err.Error(), c.name) {
				t.Errorf("LoadConfig: %v, want an error naming %s", err, c.name)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows E2A_NATS_PASSWORD: %v", err)
			}
		})
	}
	// The values these checks must keep accepting.
	for _, kv := range []string{"E2A_NATS_PORT=0", "E2A_NATS_PORT=65535", "E2A_HTTP_ADDR=:8080", "E2A_LOG_LEVEL=DEBUG",
		"E2A_LOG_FORMAT=text", "E2A_DEFAULT_POOL=tools_v2", "E2A_NATS_RECONNECT_WAIT=0",
		"E2A_NATS_CREDS=/c.creds"} { // without E2A_NATS_URL: not read
		k, v, _ := strings.Cut(kv, "=")
		t.Run("ok "+kv, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := LoadConfig(); err != nil {
				t.Errorf("%s refused: %v", kv, err)
			}
		})
	}
}

// TestConfigEmptyHTTPAddrNotPublic: `e2a dev` with E2A_HTTP_ADDR set
// but empty does not start. It started, its banner saying "HTTP
// http://[::]:34919": every interface, no auth, a port nobody chose.
func TestConfigEmptyHTTPAddrNotPublic(t *testing.T) {
	banner, stderr := cfgBanner(t, "E2A_HTTP_ADDR=")
	if banner != nil {
		t.Fatalf("e2a dev with E2A_HTTP_ADDR empty started:\n%s", strings.Join(banner, "\n"))
	}
	if !strings.Contains(strings.Join(stderr, "\n"), "E2A_HTTP_ADDR") {
		t.Errorf("refused without naming E2A_HTTP_ADDR: %q", stderr)
	}
}

// TestConfigPushValuesNameVariable: a refused E2A_PUSH_TIMEOUT,
// E2A_PUSH_RETRY_WINDOW, E2A_PUSH_ACK_WAIT or E2A_PUSH_ALLOW_HOSTS names
// its variable. `e2a
// push` (and dev and serve) said "push config store: push: invalid option:
// timeout 0s (10ms..5m)", naming none of the six E2A_PUSH_* variables.
func TestConfigPushValuesNameVariable(t *testing.T) {
	srv, _ := natstest.RunServer(t)
	for _, kv := range []string{"E2A_PUSH_TIMEOUT=0", "E2A_PUSH_RETRY_WINDOW=-1h", "E2A_PUSH_ACK_WAIT=500ms", "E2A_PUSH_ALLOW_HOSTS=http://x/"} {
		name, _, _ := strings.Cut(kv, "=")
		code, _, errOut := runBin(t, joinEnv(srv.ClientURL(), "E2A_LOG_LEVEL=error", kv), "push")
		if code == 0 || !strings.Contains(errOut, name) {
			t.Errorf("e2a push with %s: exit %d, the error does not name %s: %s", kv, code, name, strings.TrimSpace(errOut))
		}
	}
}

// TestConfigPoolFlagChecked: `e2a agent --pool` and `e2a acp --pool`
// with a name no subject can hold are bad arguments (exit 2, naming
// --pool), refused before NATS is started or the upstream called. `e2a
// agent --pool a.b --http URL` called the upstream first and, when it
// answered, exited 1 with "pool a.b: subjects: invalid agent pool name";
// `--pool ""` with "bridge: invalid option: history needs a pool";
// `--pool travel` without an upstream exited 1 with "no built-in agent"
// after starting NATS and its listener.
func TestConfigPoolFlagChecked(t *testing.T) {
	dead := "http://127.0.0.1:" + strconv.Itoa(natstest.FreePorts(t, 1)[0]) + "/"
	env := embeddedEnv("E2A_LOG_LEVEL=error")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--pool", "a.b", "--http", dead}, "--pool"},
		{[]string{"agent", "--pool", "", "--http", dead}, "--pool"},
		{[]string{"agent", "--pool", "x>"}, "--pool"},
		{[]string{"acp", "--pool", "a*"}, "--pool"},
		// A valid name with no built-in agent and no upstream: exit 1
		// once NATS and the listener had started.
		{[]string{"agent", "--pool", "travel"}, "no built-in agent"},
		// An upstream flag given empty (`--http "$URL"`, URL unset) ran
		// without the agent asked for: the demo agent, exit 0.
		{[]string{"agent", "--pool", "demo", "--http", ""}, "--http is given empty"},
		{[]string{"dev", "--a2a", ""}, "--a2a is given empty"},
		{[]string{"acp", "--http", ""}, "--http is given empty"},
	} {
		code, _, errOut := runBin(t, env, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Usage: e2a "+c.args[0]) {
			t.Errorf("e2a %q: exit %d, want 2 saying %q, with the help: %s", c.args, code, c.want, strings.TrimSpace(errOut))
		}
	}
}

// TestThinkOpenFlag: --think-open (or E2A_UPSTREAM_THINK_OPEN) sets the
// openai upstream's ThinkOpen, and is refused for another upstream, where
// it would mean nothing.
func TestThinkOpenFlag(t *testing.T) {
	u, err := (bridgeFlags{openai: "http://127.0.0.1:8000/v1", model: "m", thinkOpen: true}).upstream(UpstreamConfig{})
	if err != nil || !u.ThinkOpen {
		t.Fatalf("--openai --think-open: %+v %v", u, err)
	}
	if u, err := (bridgeFlags{openai: "http://127.0.0.1:8000/v1", model: "m"}).upstream(UpstreamConfig{ThinkOpen: true}); err != nil || !u.ThinkOpen {
		t.Fatalf("E2A_UPSTREAM_THINK_OPEN: %+v %v", u, err)
	}
	for _, f := range []bridgeFlags{{a2a: "http://127.0.0.1:9999", thinkOpen: true}, {http: "http://127.0.0.1:8001/", thinkOpen: true}} {
		if _, err := f.upstream(UpstreamConfig{}); err == nil || !strings.Contains(err.Error(), "--think-open") {
			t.Errorf("%+v: %v, want --think-open refused", f, err)
		}
	}
}

// TestModelSystemFlagsOpenAIOnly: --model and --system are the openai
// upstream's; given with --a2a or --http they are refused, not dropped
// without a word (the system prompt typed was never sent).
func TestModelSystemFlagsOpenAIOnly(t *testing.T) {
	if u, err := (bridgeFlags{openai: "http://127.0.0.1:8000/v1", model: "m", system: "be brief"}).upstream(UpstreamConfig{}); err != nil || u.Model != "m" || u.System != "be brief" {
		t.Fatalf("--openai --model --system: %+v %v", u, err)
	}
	for _, c := range []struct {
		f    bridgeFlags
		want string
	}{
		{bridgeFlags{a2a: "http://127.0.0.1:9999", model: "m"}, "--model is for the openai upstream, not a2a"},
		{bridgeFlags{http: "http://127.0.0.1:8001/", system: "be brief"}, "--system is for the openai upstream, not http"},
	} {
		if _, err := c.f.upstream(UpstreamConfig{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
	// E2A_UPSTREAM_MODEL set for every pool of a deployment is no flag: kept.
	if _, err := (bridgeFlags{http: "http://127.0.0.1:8001/"}).upstream(UpstreamConfig{Model: "m"}); err != nil {
		t.Errorf("--http with E2A_UPSTREAM_MODEL: %v", err)
	}
}

// TestConfigRefusedBeforeStart: `e2a dev` and `e2a serve` refuse a bad
// auth or push variable before anything starts, naming it: they started
// the embedded server and provisioned nine streams and buckets (in
// E2A_STORE_DIR when set) first, then exited.
func TestConfigRefusedBeforeStart(t *testing.T) {
	srv, _ := natstest.RunServer(t)
	for _, c := range []struct{ kv, want string }{
		{"E2A_PUSH_ALLOW_HOSTS=http://x/", "E2A_PUSH_ALLOW_HOSTS"},
		{"E2A_API_KEYS=alice:short", "E2A_API_KEYS entry 1"},
		{"E2A_PUSH=maybe", "E2A_PUSH="},
		{"E2A_PUSH_TIMEOUT=0s", "E2A_PUSH_TIMEOUT"},
	} {
		store := t.TempDir()
		code, _, errOut := runBin(t, embeddedEnv("E2A_LOG_LEVEL=info",
			"E2A_STORE_DIR="+store, c.kv), "dev")
		entries, _ := os.ReadDir(store)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "provisioned") || len(entries) > 0 {
			t.Errorf("e2a dev with %s: exit %d, %d entries in the store, want 1 naming %q before starting: %s",
				c.kv, code, len(entries), c.want, strings.TrimSpace(errOut))
		}
		code, _, errOut = runBin(t, joinEnv(srv.ClientURL(), "E2A_LOG_LEVEL=info", c.kv), "serve")
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "provisioned") || strings.Contains(errOut, "connected") {
			t.Errorf("e2a serve with %s: exit %d, want 1 naming %q before connecting: %s", c.kv, code, c.want, strings.TrimSpace(errOut))
		}
	}
}

// TestBannerTryNamesCredential: with auth required, the banner's example
// request carries a credential placeholder (it printed a curl answered
// 401), and the banner says the embedded NATS server has no users (the
// principals' isolation is the HTTP door's: a local process reading the
// streams sees everyone's); without auth it says neither.
func TestBannerTryNamesCredential(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"E2A_API_KEYS=alice:ak_banner_0123456789abcdef"}, "-H '" + ingress.HeaderAPIKey + ": <your key>'"},
		{nil, ""},
	} {
		banner, errOut := cfgBanner(t, c.env...)
		// With auth, the embedded server's lack of users is said.
		if warned := slices.ContainsFunc(banner, func(l string) bool { return strings.Contains(l, "no NATS users") }); warned != (c.want != "") {
			t.Errorf("%v: the banner warns of NATS without users: %v, want %v (%q)", c.env, warned, c.want != "", banner)
		}
		i := slices.IndexFunc(banner, func(l string) bool { return strings.Contains(l, "curl -N") })
		if i < 0 {
			t.Fatalf("%v: no example in the banner %q %q", c.env, banner, errOut)
		}
		if c.want != "" && !strings.Contains(banner[i], c.want) || c.want == "" && strings.Contains(banner[i], "<your") {
			t.Errorf("%v: example %q, want credential %q", c.env, banner[i], c.want)
		}
	}
}

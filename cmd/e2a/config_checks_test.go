package main

// The configuration as an operator meets it: docs/configuration.md and the
// E2A_* variables, the commands' -h texts, what `e2a dev` prints, and bad
// values. Each test names what it failed on before it passed.

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// cfgEnvTags returns the envconfig tags of v's struct fields, embedded
// structs and nested structs included, each with its default tag.
func cfgEnvTags(v any) map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if name := f.Tag.Get("envconfig"); name != "" {
				out[name] = f.Tag.Get("default")
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeOf(v))
	return out
}

// cfgDocLines are the lines of docs/configuration.md and of the documents
// it sends the reader to for the push stage, the workflow executor and
// authentication.
func cfgDocLines(t *testing.T) []string {
	t.Helper()
	var lines []string
	for _, p := range []string{"docs/configuration.md", "docs/push.md", "workflow/doc.go", "ingress/AUTH.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", p))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	return lines
}

// cfgDocLine returns the first doc line naming the variable: in full,
// or in the table's shorthand (`E2A_UPSTREAM_KIND`, `_URL`: a line with a
// variable starting with the prefix and "`_SUFFIX`"). A pattern such as
// E2A_WORKFLOW_MAX_* names no variable.
func cfgDocLine(lines []string, name string) (string, bool) {
	full := regexp.MustCompile(`(^|[^A-Z0-9_])` + name + `([^A-Z0-9_*<]|$)`)
	for _, l := range lines {
		if full.MatchString(l) {
			return l, true
		}
	}
	for i := len("E2A_"); i < len(name); i++ {
		if name[i] != '_' {
			continue
		}
		prefix, suffix := name[:i+1], "`"+name[i:]+"`"
		for _, l := range lines {
			if strings.Contains(l, suffix) && strings.Contains(l, "`"+prefix) {
				return l, true
			}
		}
	}
	return "", false
}

// TestConfigVariablesDocumented: docs/configuration.md says it lists
// "every environment variable the e2a command reads" (pointing to push.md,
// workflow/doc.go and AUTH.md for some). E2A_NATS_NAME,
// E2A_NATS_RECONNECT_WAIT (both set by the shipped manifests) and
// E2A_NATS_RECONNECT_BUFFER, and the workflow executor's limits
// (E2A_WORKFLOW_MAX_STEPS, …_MAX_EXECUTION_TIME, …) were read but named in
// none; every variable read is named now.
func TestConfigVariablesDocumented(t *testing.T) {
	lines := cfgDocLines(t)
	for _, c := range []struct {
		name string
		v    any
	}{{"Config", Config{}}, {"UpstreamConfig", UpstreamConfig{}}, {"pushEnv", pushEnv{}}, {"workflow.Config", workflow.Config{}}} {
		t.Run(c.name, func(t *testing.T) {
			tags := cfgEnvTags(c.v)
			if len(tags) < 4 {
				t.Fatalf("only %d tags: the walk is broken", len(tags))
			}
			for name := range tags {
				if _, ok := cfgDocLine(lines, name); !ok {
					t.Errorf("%s is read (envconfig) but docs/configuration.md and the docs it points to never name it", name)
				}
			}
		})
	}
}

// TestConfigEnvPrefixesDocumented: the workflow vault reads variables by
// prefix from the environment (workflow.Vault.LoadEnv), which
// TestConfigVariablesDocumented's walk of the envconfig tags never sees:
// E2A_WORKFLOW_CREDHOSTS_<NAME>, binding an environment credential to its
// hosts, was read but named in no document an operator reads (only in a
// Go comment of workflow/vault.go).
func TestConfigEnvPrefixesDocumented(t *testing.T) {
	doc := strings.Join(cfgDocLines(t), "\n")
	for _, prefix := range []string{workflow.EnvCredentialPrefix, workflow.EnvCredentialHostPrefix} {
		if !strings.Contains(doc, prefix+"<NAME>") {
			t.Errorf("%s<NAME> is read (workflow.Vault.LoadEnv) but docs/configuration.md and the docs it points to never name it", prefix)
		}
	}
}

// TestConfigDefaultsMatchDocs: every default of
// Config and UpstreamConfig appears in its row's default column of
// docs/configuration.md.
func TestConfigDefaultsMatchDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var vars, defaults []string // the table's first two columns
	for _, l := range strings.Split(string(b), "\n") {
		if cells := strings.Split(l, "|"); strings.HasPrefix(l, "| `E2A_") && len(cells) > 3 {
			vars, defaults = append(vars, cells[1]), append(defaults, cells[2])
		}
	}
	tags := cfgEnvTags(Config{})
	for k, v := range cfgEnvTags(UpstreamConfig{}) {
		tags[k] = v
	}
	checked := 0
	for name, def := range tags {
		cell, ok := cfgDocLine(vars, name)
		if !ok || def == "" {
			continue // undocumented: TestConfigVariablesDocumented
		}
		checked++
		i := slices.Index(vars, cell)
		if !strings.Contains(defaults[i], "`"+def+"`") {
			t.Errorf("%s: default %q, the doc's default column says %q", name, def, defaults[i])
		}
	}
	if checked < 35 {
		t.Errorf("only %d defaults found in the table: the parse is broken", checked)
	}
}

// TestHelpDespiteBadEnvironment: help exits 0 whatever the environment,
// and e2a bench and e2a vault (which read no E2A_* configuration) run. With
// one value the configuration refuses (E2A_TASKS_TTL=1h, a shortened TTL
// the doc suggests, or E2A_REPLICAS=0) `e2a help`, `e2a dev -h`, `e2a vault
// key` and `e2a bench -h` all exited 1.
func TestHelpDespiteBadEnvironment(t *testing.T) {
	for _, env := range []string{"E2A_TASKS_TTL=1h", "E2A_REPLICAS=0"} {
		for _, args := range [][]string{{"help"}, {"dev", "-h"}, {"bench", "-h"}, {"vault", "key"}} {
			code, out, errOut := runBin(t, []string{"E2A_NATS_URL=", env}, args...)
			if code != 0 || out == "" {
				t.Errorf("%s e2a %s: exit %d, stdout %d bytes, stderr %q", env, strings.Join(args, " "), code, len(out), strings.TrimSpace(errOut))
			}
		}
	}
}

// TestCommandHelpListsVariables: `e2a streams apply -h` lists every
// variable it applies (it left out E2A_RESPONSES_MAX_BYTES,
// E2A_CONTROL_MAX_BYTES and the three *_COMPRESSION), `e2a agent -h`
// E2A_UPSTREAM_CARD_REFRESH and E2A_NATS_PORT and E2A_STORE_DIR of the
// embedded server it starts without E2A_NATS_URL (all left out).
func TestCommandHelpListsVariables(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"streams", "apply", "-h"}, []string{"E2A_REPLICAS", "E2A_REQUESTS_MAX_AGE", "E2A_RESPONSES_MAX_AGE",
			"E2A_REQUESTS_MAX_BYTES", "E2A_RESPONSES_MAX_BYTES", "E2A_CONTROL_MAX_BYTES", "E2A_AUDIT_MAX_AGE", "E2A_AUDIT_MAX_BYTES",
			"E2A_ARCHIVE_MAX_AGE", "E2A_ARCHIVE_MAX_BYTES", "E2A_REQUESTS_COMPRESSION", "E2A_RESPONSES_COMPRESSION",
			"E2A_AUDIT_COMPRESSION", "E2A_DEDUPE_WINDOW", "E2A_TASKS_TTL", "E2A_INDEX_MAX_BYTES", "E2A_KV_MAX_BYTES"}},
		{[]string{"agent", "-h"}, []string{"E2A_UPSTREAM_CARD_REFRESH", "E2A_NATS_PORT", "E2A_STORE_DIR", "E2A_METRICS_ADDR", "E2A_AGENT_DEADLINE"}},
		// Every process serves /metrics on E2A_METRICS_ADDR when set
		// (README, Operations); push's help left it out.
		{[]string{"push", "-h"}, []string{"E2A_METRICS_ADDR"}},
		{[]string{"dev", "-h"}, []string{"E2A_METRICS_ADDR"}},
		{[]string{"serve", "-h"}, []string{"E2A_METRICS_ADDR"}},
		{[]string{"archive", "-h"}, []string{"E2A_METRICS_ADDR"}},
		// Every stage's manifest sets E2A_MEMORY_LIMIT (deploy/k8s), and
		// every stage applies it; only agent's help listed it.
		{[]string{"push", "-h"}, []string{"E2A_MEMORY_LIMIT"}},
		{[]string{"archive", "-h"}, []string{"E2A_MEMORY_LIMIT"}},
		{[]string{"serve", "-h"}, []string{"E2A_MEMORY_LIMIT"}},
		{[]string{"dev", "-h"}, []string{"E2A_MEMORY_LIMIT"}},
		{[]string{"agent", "-h"}, []string{"E2A_MEMORY_LIMIT"}},
	} {
		code, out, _ := runBin(t, []string{"E2A_NATS_URL="}, c.args...)
		if code != 0 {
			t.Fatalf("e2a %v: exit %d", c.args, code)
		}
		for _, w := range c.want {
			if !regexp.MustCompile(w + `\b`).MatchString(out) {
				t.Errorf("e2a %s: help does not list %s, which the command reads", strings.Join(c.args, " "), w)
			}
		}
	}
}

// TestStreamLimitErrorsNameVariable: a bad hot-stream limit is refused by
// LoadConfig naming its variable. It passed LoadConfig and was refused
// later by the Go field's name ("Duplicates 0s below 100ms" for
// E2A_DEDUPE_WINDOW=0, "ResponsesMaxAge").
func TestStreamLimitErrorsNameVariable(t *testing.T) {
	for _, kv := range []string{"E2A_DEDUPE_WINDOW=0", "E2A_RESPONSES_MAX_AGE=-1h", "E2A_REQUESTS_MAX_BYTES=0",
		"E2A_CONTROL_MAX_BYTES=-2", "E2A_AUDIT_MAX_AGE=-5h", "E2A_INDEX_MAX_BYTES=0", "E2A_KV_MAX_BYTES=-2"} {
		name, _, _ := strings.Cut(kv, "=")
		code, _, errOut := runBin(t, embeddedEnv("E2A_LOG_LEVEL=error", kv), "dev")
		if code == 0 || !strings.Contains(errOut, name) {
			t.Errorf("e2a dev with %s: exit %d, the error does not name %s: %s", kv, code, name, strings.TrimSpace(errOut))
		}
	}
}

// TestBadValuesNameVariable: values envconfig cannot
// parse, and the ones LoadConfig checks, are refused at once naming the
// variable.
func TestBadValuesNameVariable(t *testing.T) {
	for _, kv := range []string{"E2A_NATS_PORT=abc", "E2A_EXTENDED_CARD=maybe", "E2A_REQUESTS_COMPRESSION=zstd",
		"E2A_REPLICAS=0", "E2A_AGENT_ACK_WAIT=500ms", "E2A_ARCHIVE_BATCH_BYTES=1", "E2A_TASKS_TTL=-1h",
		"E2A_UPSTREAM_RETRIES=x", "E2A_REQUESTS_MAX_AGE=86400", "E2A_AGENT_DRAIN_TIMEOUT=-1s",
		"E2A_STREAM_FIRST_FRAME_WAIT=-1s", "E2A_STREAM_IDLE_TIMEOUT=-1m"} {
		name, val, _ := strings.Cut(kv, "=")
		t.Run(kv, func(t *testing.T) {
			t.Setenv(name, val)
			if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s: %v", kv, err)
			}
		})
	}
}

// TestNegativeLimitsRefused: a negative E2A_RATE_LIMIT_PER_MINUTE,
// E2A_MAX_STREAMS_PER_PRINCIPAL or E2A_UPSTREAM_CARD_REFRESH is refused, as
// E2A_AGENT_ACK_WAIT or E2A_REPLICAS of the same kind are. It was accepted
// and silently meant "off".
func TestNegativeLimitsRefused(t *testing.T) {
	for _, kv := range []string{"E2A_RATE_LIMIT_PER_MINUTE=-5", "E2A_MAX_STREAMS_PER_PRINCIPAL=-1", "E2A_UPSTREAM_CARD_REFRESH=-1m",
		"E2A_RATE_LIMIT_BYTES_PER_DAY=-1", "E2A_RATE_LIMIT_CANCELS_PER_MINUTE=-1", "E2A_MAX_WAITING_TURNS=-1"} {
		name, val, _ := strings.Cut(kv, "=")
		t.Run(kv, func(t *testing.T) {
			t.Setenv(name, val)
			if _, err := LoadConfig(); err == nil {
				t.Errorf("%s accepted (taken as off)", kv)
			}
		})
	}
}

// TestRateLimitBytesFromEnv: E2A_RATE_LIMIT_BYTES_PER_* alone turn the
// limiter on (its bucket, /readyz's check of it) with the budget given.
func TestRateLimitBytesFromEnv(t *testing.T) {
	t.Setenv("E2A_RATE_LIMIT_BYTES_PER_HOUR", "104857600")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !rateLimited(cfg) {
		t.Fatal("a budget of bytes alone does not turn the limiter on")
	}
	if l := cfg.rateLimits(); l.BytesPerHour != 100<<20 || l.BytesPerMinute != 0 || l.PerMinute != 0 {
		t.Fatalf("limits: %+v", l)
	}
}

// TestRateLimitCancelsFromEnv: E2A_RATE_LIMIT_CANCELS_PER_MINUTE is the
// limiter's budget of cancels, ingress.DefaultCancelsPerMinute unset, 0
// off; alone it turns no limiter on (it applies over a limit).
func TestRateLimitCancelsFromEnv(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.limiterConfig().CancelsPerMinute; got != ingress.DefaultCancelsPerMinute || rateLimited(cfg) {
		t.Fatalf("unset: %d cancels a minute (limiter on: %v), want %d and no limiter", got, rateLimited(cfg), ingress.DefaultCancelsPerMinute)
	}
	for val, want := range map[string]int{"3": 3, "0": 0} {
		t.Setenv("E2A_RATE_LIMIT_CANCELS_PER_MINUTE", val)
		cfg, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.limiterConfig().CancelsPerMinute; got != want {
			t.Errorf("E2A_RATE_LIMIT_CANCELS_PER_MINUTE=%s: %d cancels a minute", val, got)
		}
	}
}

// TestStoreDirUnusable: with E2A_STORE_DIR a regular file (or a directory
// it cannot create), `e2a dev` says so naming E2A_STORE_DIR. It waited 10 s
// and then blamed the port: "embedded NATS (E2A_NATS_PORT=0; set 0 for a
// random port): … no client listener after 10s".
func TestStoreDirUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runBin(t, embeddedEnv("E2A_STORE_DIR="+file), "dev")
	if code == 0 || !strings.Contains(errOut, "E2A_STORE_DIR") {
		t.Errorf("E2A_STORE_DIR=<a file>: exit %d: %s", code, strings.TrimSpace(errOut))
	}
}

// TestStoreDirInUse: a second `e2a dev` on the store of a running one is
// refused at once, naming E2A_STORE_DIR (it started a second embedded
// server on the same files); the banner says where the store is kept, or
// that it is temporary.
func TestStoreDirInUse(t *testing.T) {
	dir := t.TempDir()
	banner, errOut := cfgBanner(t, "E2A_STORE_DIR="+dir)
	if !slices.ContainsFunc(banner, func(l string) bool {
		return strings.Contains(l, "store") && strings.Contains(l, dir) && strings.Contains(l, "kept across restarts")
	}) {
		t.Errorf("banner with E2A_STORE_DIR names no store: %q %q", banner, errOut)
	}
	code, _, second := runBin(t, embeddedEnv("E2A_STORE_DIR="+dir), "dev")
	if code != 1 || !strings.Contains(second, "E2A_STORE_DIR="+dir+" is in use by another process") {
		t.Errorf("second e2a dev on the same store: exit %d: %s", code, strings.TrimSpace(second))
	}
	banner, errOut = cfgBanner(t)
	if !slices.ContainsFunc(banner, func(l string) bool { return strings.Contains(l, "store") && strings.Contains(l, "temporary") }) {
		t.Errorf("banner without E2A_STORE_DIR does not say the store is temporary: %q %q", banner, errOut)
	}
}

// cfgTakenPort listens on a loopback port for the test's duration.
func cfgTakenPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestStagePortTaken: `e2a agent` and `e2a serve` name E2A_HTTP_ADDR
// when their port is taken, as `e2a dev` does (TestDevPortTaken), and `e2a
// agent` without E2A_NATS_URL beside a running `e2a dev` (its NATS port
// taken) says the port is in use. They said only "listen tcp …: bind:
// address already in use", and the agent waited 10 s for "no client
// listener".
func TestStagePortTaken(t *testing.T) {
	port := cfgTakenPort(t)
	srv, _ := natstest.RunServer(t)
	for _, c := range []struct {
		what string
		env  []string
		args []string
		want string
	}{
		{"agent, HTTP taken", []string{"E2A_NATS_URL=", "E2A_NATS_PORT=0", "E2A_HTTP_ADDR=127.0.0.1:" + port}, []string{"agent", "--pool", "demo"}, "E2A_HTTP_ADDR"},
		{"serve, HTTP taken", []string{"E2A_NATS_URL=" + srv.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:" + port}, []string{"serve"}, "E2A_HTTP_ADDR"},
		{"agent, NATS port taken", []string{"E2A_NATS_URL=", "E2A_NATS_PORT=" + port, "E2A_HTTP_ADDR=127.0.0.1:0"}, []string{"agent", "--pool", "demo"}, "already in use"},
	} {
		code, _, errOut := runBin(t, append(c.env, "E2A_LOG_LEVEL=error"), c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, want %q: %s", c.what, code, c.want, strings.TrimSpace(errOut))
		}
	}
	// A bridge worker whose port is taken stops before its pool's card is
	// published: clients were shown an agent card for a pool no worker
	// serves (its requests 404 unknown_agent) until the card expired.
	up := testkit.NewAnswerer(t, "application/json", nil)
	code, _, errOut := runBin(t, []string{"E2A_NATS_URL=" + srv.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:" + port, "E2A_LOG_LEVEL=error"},
		"agent", "--pool", "taken", "--http", up.URL)
	if code != 1 || !strings.Contains(errOut, "E2A_HTTP_ADDR") {
		t.Errorf("bridge agent, HTTP taken: exit %d: %s", code, strings.TrimSpace(errOut))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if info, found, err := bridge.LookupPool(ctx, js, "taken"); err != nil || found {
		t.Errorf("the pool of a worker that did not start: card %+v found %v (%v)", info, found, err)
	}
}

// cfgBanner starts `e2a dev` with env and returns its banner (the
// lines up to "Ctrl-C stops."), or what it wrote on stderr if it ended.
func cfgBanner(t *testing.T, env ...string) (banner []string, stderr []string) {
	t.Helper()
	env = append(embeddedEnv("E2A_LOG_LEVEL=error"), env...)
	stdout, errc := startBin(t, env, "dev")
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-stdout:
			if !ok {
				for l := range errc {
					stderr = append(stderr, l)
				}
				return nil, stderr
			}
			banner = append(banner, l)
			if strings.HasPrefix(l, "Ctrl-C stops.") {
				return banner, nil
			}
		case <-timeout:
			t.Fatalf("no banner: %q", banner)
		}
	}
}

// TestDevBannerAddressesAnswer: every URL and address the banner of `e2a
// dev` prints answers: the HTTP, console, card, metrics, health, ready,
// NATS and gRPC lines. With E2A_GRPC_ADDR=127.0.0.1:0 it printed "A2A gRPC
// 127.0.0.1:0", the setting, not the port it listens on.
func TestDevBannerAddressesAnswer(t *testing.T) {
	banner, stderr := cfgBanner(t, "E2A_GRPC_ADDR=127.0.0.1:0", "E2A_METRICS_ADDR=127.0.0.1:0", "E2A_ARCHIVE=true")
	if banner == nil {
		t.Fatalf("e2a dev ended: %q", stderr)
	}
	text := strings.Join(banner, "\n")
	urls := regexp.MustCompile(`http://\S+/(?:console|\.well-known/agent-card\.json|metrics|healthz|readyz)\b`).FindAllString(text, -1)
	if len(urls) != 5 {
		t.Errorf("banner URLs %q, want console, card, metrics, health, ready:\n%s", urls, text)
	}
	for _, u := range urls {
		if strings.HasSuffix(u, "/readyz") {
			// Ready once the in-process stages have made what they need
			// (the push stage's consumers, the archiver's state), a moment
			// after the banner.
			testkit.Eventually(t, 10*time.Second, "banner URL "+u+" 200", func() bool {
				code, _ := httpGet(t, u)
				return code == 200
			})
			continue
		}
		if code, _ := httpGet(t, u); code != 200 {
			t.Errorf("banner URL %s: %d", u, code)
		}
	}
	for _, re := range []string{`NATS\s+nats://(\S+)`, `A2A gRPC\s+(\S+)`} {
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("banner lacks %s:\n%s", re, text)
			continue
		}
		c, err := net.DialTimeout("tcp", m[1], 5*time.Second)
		if err != nil {
			t.Errorf("banner address %s does not answer: %v", m[0], err)
			continue
		}
		c.Close()
	}
}

// cfgURLs returns every string under a "url" key of v.
func cfgURLs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && strings.EqualFold(k, "url") {
				out = append(out, s)
			}
			out = append(out, cfgURLs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, cfgURLs(e)...)
		}
	}
	return out
}

// TestPublicURLWithoutScheme: E2A_PUBLIC_URL=e2a.example.com (a host
// without its scheme, an easy slip) is refused naming the variable. It was
// accepted, and the agent card advertised "e2a.example.com/a2a/v1", a
// relative URL no A2A client can call.
func TestPublicURLWithoutScheme(t *testing.T) {
	banner, stderr := cfgBanner(t, "E2A_PUBLIC_URL=e2a.example.com")
	if banner == nil {
		if !strings.Contains(strings.Join(stderr, "\n"), "E2A_PUBLIC_URL") {
			t.Errorf("refused without naming E2A_PUBLIC_URL: %q", stderr)
		}
		return
	}
	m := regexp.MustCompile(`agent card (http://\S+)`).FindStringSubmatch(strings.Join(banner, "\n"))
	if m == nil {
		t.Fatalf("no agent card line: %q", banner)
	}
	code, body := httpGet(t, m[1])
	var card any
	if code != 200 || json.Unmarshal([]byte(body), &card) != nil {
		t.Fatalf("card: %d %s", code, body)
	}
	urls := cfgURLs(card)
	if len(urls) == 0 {
		t.Fatalf("no url in the card: %s", body)
	}
	for _, s := range urls {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Errorf("E2A_PUBLIC_URL=e2a.example.com accepted; the card advertises %q", s)
		}
	}
}

// TestConnConfigTagsRead: the connection variables
// the manifests set (E2A_NATS_NAME, E2A_NATS_RECONNECT_WAIT) are read.
func TestConnConfigTagsRead(t *testing.T) {
	t.Setenv("E2A_NATS_NAME", "pod-1")
	t.Setenv("E2A_NATS_RECONNECT_WAIT", "250ms")
	c, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "pod-1" || c.ReconnectWait != 250*time.Millisecond {
		t.Errorf("ConnConfig %+v", c.ConnConfig)
	}
}

// TestMaxWaitingTurnsFromEnv: E2A_MAX_WAITING_TURNS defaults to
// ingress.DefaultMaxWaitingTurns, is read as given (0: unbounded), and a
// negative value stops the command (TestNegativeLimitsRefused).
func TestMaxWaitingTurnsFromEnv(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxWaitingTurns != ingress.DefaultMaxWaitingTurns {
		t.Errorf("default E2A_MAX_WAITING_TURNS %d, want ingress.DefaultMaxWaitingTurns (%d)", cfg.MaxWaitingTurns, ingress.DefaultMaxWaitingTurns)
	}
	for _, v := range []int{0, 12} {
		t.Setenv("E2A_MAX_WAITING_TURNS", strconv.Itoa(v))
		if cfg, err := LoadConfig(); err != nil || cfg.MaxWaitingTurns != v {
			t.Errorf("E2A_MAX_WAITING_TURNS=%d: %d, %v", v, cfg.MaxWaitingTurns, err)
		}
	}
}

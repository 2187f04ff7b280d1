package main

// Review of the e2a command's configuration, flags, errors and exit codes
// (cli area): each test failed on the code it was written against.

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestUpstreamURLCredentialsNotPrinted: an upstream URL that holds
// credentials is refused (bridge.ParseURL) and redacted when it parses
// (TestAgentBridgeArgs), but was printed verbatim, password included, when
// it did not parse (a secret with a "/", as base64 keys have, makes the
// authority's "port" invalid) or was not http(s). The docs: the upstream's
// secrets are "never logged, published or shown".
func TestUpstreamURLCredentialsNotPrinted(t *testing.T) {
	env := embeddedEnv("E2A_LOG_LEVEL=error")
	for _, c := range []struct{ url, secret string }{
		{"http://bot:k3y/Zq9Wx7@agent.example/agent", "k3y/Zq9Wx7"},
		{"ftp://bot:s3cretPw77@agent.example/agent", "s3cretPw77"},
	} {
		code, _, errOut := runBin(t, env, "agent", "--pool", "p", "--http", c.url)
		if code == 0 {
			t.Errorf("--http %s accepted", c.url)
		}
		if strings.Contains(errOut, c.secret) || strings.Contains(errOut, strings.SplitN(c.secret, "/", 2)[0]) {
			t.Errorf("--http with credentials in the URL: the error shows the password (exit %d): %s", code, strings.TrimSpace(errOut))
		}
	}
}

// TestNATSUnreachableNamesURL: with E2A_NATS_URL pointing at no server,
// `e2a serve` exited 1 with nats.go's bare "nats: no servers available for
// connection": neither the variable nor the address it tried. Every other
// start failure names its variable (E2A_HTTP_ADDR, E2A_METRICS_ADDR,
// E2A_NATS_PORT, E2A_STORE_DIR, the upstream's URL). It then named them
// and nothing of what to do: beside e2a dev (the README's export, e2a dev
// stopped or moved off 4222), the URL is the one e2a dev prints.
func TestNATSUnreachableNamesURL(t *testing.T) {
	port := strconv.Itoa(natstest.FreePorts(t, 1)[0])
	code, _, errOut := runBin(t, []string{"E2A_NATS_URL=nats://127.0.0.1:" + port, "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_LEVEL=error"}, "serve")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut, "E2A_NATS_URL") && !strings.Contains(errOut, "127.0.0.1:"+port) {
		t.Errorf("unreachable NATS: the error names neither E2A_NATS_URL nor the address: %s", strings.TrimSpace(errOut))
	}
	for _, want := range []string{"no NATS server answers there", "is e2a dev running? it prints its NATS URL"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("unreachable NATS: the error lacks %q: %s", want, strings.TrimSpace(errOut))
		}
	}
}

// TestAgentConcurrencyRefusedBeforeStart: `e2a agent --concurrency 0`
// (or above 65536) is a bad argument, and was checked by the agent runtime
// only once everything started: the exit code was 1, not 2 as --ack-wait
// 100ms (main.go: 2 bad arguments), and for a bridge pool the upstream had
// been probed and the pool's card published in E2A_BRIDGE by then, for a
// pool no worker serves (the bridge's own refused settings are checked
// before both, TestRefusedBoundPublishesNoCard).
func TestAgentConcurrencyRefusedBeforeStart(t *testing.T) {
	upstream, probes := probedUpstream(t)
	_, nc := natstest.RunServer(t)
	code, _, errOut := runBin(t, joinEnv(nc.ConnectedUrl(), "E2A_LOG_LEVEL=error"),
		"agent", "--pool", "badconc", "--concurrency", "0", "--http", upstream.URL+"/agent")
	if code != 2 {
		t.Errorf("--concurrency 0: exit %d, want 2 (bad arguments): %s", code, strings.TrimSpace(errOut))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, found, err := bridge.LookupPool(ctx, natstest.JetStream(t, nc), "badconc")
	if err != nil {
		t.Fatal(err)
	}
	if found {
		t.Errorf("--concurrency 0 refused, yet the pool's card is published: %+v", info)
	}
	if n := len(probes); n > 0 {
		t.Errorf("--concurrency 0: the upstream was called %d time(s) before the argument was refused", n)
	}
}

// TestTailNegativePoll: `e2a tail --poll -1s` was accepted and silently
// polled every 200ms (audit.Tail's default), exiting 0 when interrupted,
// where a bad flag value is exit 2 with the command's help (as `e2a replay
// --since yesterday` or `e2a agent --ack-wait 100ms`); --poll 1ns read
// the streams without a pause (a core of CPU, as many requests to the
// servers): at least 10ms.
func TestTailNegativePoll(t *testing.T) {
	_, nc := natstest.RunServer(t)
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.NatsURL = nc.ConnectedUrl()
	for _, v := range []string{"-1s", "1ns", "9ms"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := runTail(ctx, cfg, []string{"--poll", v}, io.Discard, io.Discard)
		cancel()
		if !errors.Is(err, errFlags) && !errors.Is(err, errArgs) {
			t.Errorf("e2a tail --poll %s: %v (exit %d), want a bad-argument error (exit 2)", v, err, exitCode(err, io.Discard))
		}
	}
}

// TestBenchBadDurations: e2a bench took a duration flag out of range for
// the bench package's default without a word: --duration -1s ran the
// whole in-process bench instead of a soak, --timeout 0 and --interval 0
// ran with 1m and 10s. Each is a bad flag (exit 2), said before anything
// starts (the context given is already cancelled), as are a --sweep that
// does not parse and flags no mode takes together (they exited 1).
func TestBenchBadDurations(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"--duration", "-1s", "--rate", "1"},
		{"--timeout", "0"},
		{"--timeout", "-1s"},
		{"--duration", "1s", "--rate", "1", "--interval", "0"},
		{"--delay", "-1ms"},
		{"--duration", "1s", "--rate", "1", "--retention", "-1h"},
		{"--recovery", "--ack-wait", "-1s"},
		// Refused as failures (exit 1): a list that does not parse, flags
		// no mode takes together.
		{"--sweep", "a"},
		{"--kill", "worker"},
		{"--peer", "a2a-go", "--duration", "1s"},
	} {
		if err := runBench(ctx, Config{}, args); exitCode(err, io.Discard) != exitUsage {
			t.Errorf("e2a bench %q: %v (exit %d), want a bad flag (exit 2)", args, err, exitCode(err, io.Discard))
		}
	}
}

// TestUpstreamBadValuesNameVariable: a refused E2A_UPSTREAM_* value
// stopped `e2a agent` (exit 1) with the bridge's option error ("connect
// timeout -1s must be > 0", "retry 3, -5ms..10s (want …)") that named no
// variable, where every other refused setting is named
// (TestBadValuesNameVariable; E2A_UPSTREAM_CARD_REFRESH and
// E2A_UPSTREAM_HEADERS are): in a Deployment's environment the operator
// could not tell which of fifteen E2A_UPSTREAM_* variables to fix.
func TestUpstreamBadValuesNameVariable(t *testing.T) {
	env := embeddedEnv("E2A_LOG_LEVEL=error")
	for _, kv := range []string{"E2A_UPSTREAM_CONNECT_TIMEOUT=-1s", "E2A_UPSTREAM_IDLE_TIMEOUT=0s",
		"E2A_UPSTREAM_RETRY_BASE=-5ms", "E2A_UPSTREAM_RETRIES=50", "E2A_UPSTREAM_MAX_IN_FLIGHT=0"} {
		name, _, _ := strings.Cut(kv, "=")
		code, _, errOut := runBin(t, append(append([]string{}, env...), kv), "agent", "--pool", "p", "--http", "http://127.0.0.1:1/agent")
		if code == 0 || !strings.Contains(errOut, name) {
			t.Errorf("%s: exit %d, the error does not name %s: %s", kv, code, name, strings.TrimSpace(errOut))
		}
	}
}

// TestNATSURLPasswordNotPrinted: E2A_NATS_URL may carry credentials
// (nats.go takes them in a URL; streams.RedactURLs exists so that a URL
// printed or logged never shows them). A URL that does not parse, here a
// password with a "/", made `e2a serve` (and every stage) exit with
// nats.go's url.Parse error, which quotes the whole URL, password
// included.
func TestNATSURLPasswordNotPrinted(t *testing.T) {
	const secret = "Pa55/w0rdXy"
	for _, args := range [][]string{{"serve"}, {"dev"}} {
		code, _, errOut := runBin(t, []string{"E2A_NATS_URL=nats://admin:" + secret + "@nats.example:4222",
			"E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_LEVEL=error"}, args...)
		if code == 0 {
			t.Errorf("e2a %s with a malformed E2A_NATS_URL: exit 0", args[0])
		}
		if strings.Contains(errOut, "Pa55") {
			t.Errorf("e2a %s: the error shows the NATS password of E2A_NATS_URL: %s", args[0], strings.TrimSpace(errOut))
		}
	}
}

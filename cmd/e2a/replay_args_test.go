package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// A malformed query is a bad argument (exit 2, as a bad flag is), not
// exit 1, which says a request breaks an invariant: a script tells a typo
// from a broken request. No selection at all, an unknown --source, a
// negative --limit, --until before --since, a --pool that is no pool name,
// and an id over 1024 bytes all pass the flags and fail Query.Validate;
// a --partitions out of 1..1024 is refused too (0 and negative ones read
// the stream's count without a word, 1025 failed as a read, exit 1), an
// empty id (no request has one) and a negative duration ago ("--since
// -2h", two hours ahead) were read and not found, exit 3.
func TestReplayBadQueryExitCode(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{},
		{"--source", "hto", "req-1"},
		{"--limit", "-1", "req-1"},
		{"--since", "1h", "--until", "2h", "--pool", "demo"},
		{"--pool", "a.b"},
		{strings.Repeat("x", 1025)},
		{"--partitions", "0", "req-1"},
		{"--partitions", "-1", "req-1"},
		{"--partitions", "1025", "req-1"},
		{""},
		{"--request", "", "req-1"},
		{"--since", "-2h", "--pool", "demo"},
		{"--until", "-1h", "--pool", "demo"},
	} {
		var out, errOut bytes.Buffer
		err := runReplay(ctx, cfg, args, &out, &errOut)
		if code := exitCode(err, io.Discard); code != exitUsage {
			t.Errorf("e2a replay %.60q: exit %d (%v), want %d (bad arguments)", args, code, err, exitUsage)
		}
	}
}

// TestReplayNoSelectionSaysWhatToGive: `e2a replay` without a selection
// (the README's `e2a replay req-42` typed without its id) says what to give,
// with an example and where the flags are listed, in the command's words
// (every refusal of Query.Validate the same way).
// It printed "e2a: bad arguments: audit: invalid query: give request ids,
// …": the name of an internal package's sentinel, no example.
func TestReplayNoSelectionSaysWhatToGive(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut, msg bytes.Buffer
	err := runReplay(ctx, cfg, nil, &out, &errOut)
	if code := exitCode(err, &msg); code != exitUsage {
		t.Fatalf("exit %d (%v), want %d", code, err, exitUsage)
	}
	for _, want := range []string{"replay: give request ids", "e2a replay req-42", "e2a replay -h"} {
		if !strings.Contains(msg.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, msg.String())
		}
	}
	if strings.Contains(msg.String(), "invalid query") {
		t.Errorf("stderr names the library's sentinel: %s", msg.String())
	}
}

// An unknown id exits 3 with the count on stderr, a malformed --since
// exits 2 without a panic.
func TestReplayUnknownIDAndBadTime(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := runReplay(ctx, cfg, []string{"no-such-request"}, &out, &errOut)
	if code := exitCode(err, io.Discard); code != exitNotFound || !strings.Contains(errOut.String(), "1 not found") {
		t.Errorf("unknown id: exit %d (%v), stderr %q", code, err, errOut.String())
	}
	err = runReplay(ctx, cfg, []string{"--since", "yesterday", "x"}, &out, &errOut)
	if code := exitCode(err, io.Discard); code != exitUsage {
		t.Errorf("--since yesterday: exit %d (%v), want %d", code, err, exitUsage)
	}
}

// Every id given is read, not only the first 1000 (the default --limit is
// for requests found by filters); an explicit --limit still bounds them.
func TestReplayReadsEveryIDGiven(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := make([]string, 1001)
	for i := range ids {
		ids[i] = fmt.Sprintf("no-such-%d", i)
	}
	for _, c := range []struct {
		args    []string
		want    string
		limited bool
	}{
		{ids, "1001 not found", false},
		{append([]string{"--limit", "3"}, ids...), "3 not found", true},
	} {
		var out, errOut bytes.Buffer
		err := runReplay(ctx, cfg, c.args, &out, &errOut)
		if code := exitCode(err, io.Discard); code != exitNotFound || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%d arguments: exit %d (%v), stderr %q, want %q", len(c.args), code, err, errOut.String(), c.want)
		}
		// A limit reached is said, not left for the reader to guess.
		if got := strings.Contains(errOut.String(), "stopped at --limit 3"); got != c.limited {
			t.Errorf("%d arguments: stderr %q: limit reached said %v, want %v", len(c.args), errOut.String(), got, c.limited)
		}
	}
}

// Flags after the ids are flags (`e2a replay req-42 --no-frames`): the
// flag package stopped at the first id, and the flag was read as a second
// request id ("2 not found"; a request could even be named --no-frames);
// after "--" everything is an id.
func TestReplayFlagsAfterIDs(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"no-such-a", "--no-frames"}, "1 not found"},
		{[]string{"no-such-a", "--limit", "5", "no-such-b"}, "2 not found"},
		{[]string{"--no-frames", "--", "no-such-a", "--no-frames"}, "2 not found"},
	} {
		var out, errOut bytes.Buffer
		err := runReplay(ctx, cfg, c.args, &out, &errOut)
		if code := exitCode(err, io.Discard); code != exitNotFound || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("e2a replay %q: exit %d (%v), stderr %q; want %q", c.args, code, err, errOut.String(), c.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := exitCode(runReplay(ctx, cfg, []string{"no-such-a", "--nope"}, &out, &errOut), io.Discard); code != exitUsage {
		t.Errorf("e2a replay id --nope: exit %d, want %d (an unknown flag)", code, exitUsage)
	}
}

// TestPublishBadFlags: e2a publish's flags that can name nothing are bad
// arguments (exit 2), and nothing is published. A --traceparent that is no
// W3C traceparent, a --tracestate without it or beyond the W3C grammar
// were dropped without a word (the request published untraced, exit 0);
// a --pool or --request-id that is none was refused after connecting as a
// failure (exit 1).
func TestPublishBadFlags(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, args := range [][]string{
		{"--traceparent", "garbage"},
		{"--traceparent", strings.ToUpper(tp)},
		{"--tracestate", "a=b"},
		{"--traceparent", tp, "--tracestate", "no equals sign"},
		{"--pool", "a.b"},
		{"--request-id", "x\x01y"},
	} {
		var out bytes.Buffer
		err := runPublish(ctx, cfg, args, strings.NewReader(`{"params":{"text":"x"}}`), &out, io.Discard)
		if code := exitCode(err, io.Discard); code != exitUsage || out.Len() != 0 {
			t.Errorf("e2a publish %q: exit %d (%v), output %q; want %d (bad arguments), nothing published", args, code, err, out.String(), exitUsage)
		}
	}
	var out bytes.Buffer
	if err := runPublish(ctx, cfg, []string{"--traceparent", tp, "--tracestate", "a=b"}, strings.NewReader(`{"params":{"text":"x"}}`), &out, io.Discard); err != nil {
		t.Errorf("a valid trace context: %v", err)
	}
}

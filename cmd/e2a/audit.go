package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// errViolations makes `e2a replay` exit non-zero when a request breaks the
// frame invariants.
var errViolations = errors.New("frame invariant violations found")

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// timeFlag reads an RFC 3339 time, or a duration meaning that long ago.
type timeFlag struct{ t *time.Time }

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f timeFlag) Set(v string) error {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			// "-2h ago" is two hours ahead: nothing is stored yet.
			return fmt.Errorf("%q: a duration ago is not negative (e.g. 2h)", v)
		}
		*f.t = time.Now().Add(-d)
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return fmt.Errorf("%q is neither an RFC 3339 time nor a duration (e.g. 2h)", v)
	}
	*f.t = t
	return nil
}

// checkPositive refuses a duration flag of fs (each of names) set to 0 or
// less as a bad flag (exit 2, the command's help on stderr), as parseFlags
// refuses a value that does not parse: the library would take it for its
// default, which the flag's help does not say.
func checkPositive(fs *flag.FlagSet, stderr io.Writer, names ...string) error {
	return checkDurations(fs, stderr, false, names...)
}

// checkNotNegative is checkPositive for duration flags whose 0 means off
// or a default (the help says which): a negative one is refused.
func checkNotNegative(fs *flag.FlagSet, stderr io.Writer, names ...string) error {
	return checkDurations(fs, stderr, true, names...)
}

// checkDurations refuses a duration flag of fs below 0, or at 0 unless
// zero.
func checkDurations(fs *flag.FlagSet, stderr io.Writer, zero bool, names ...string) error {
	for _, name := range names {
		d := fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration)
		if d > 0 || zero && d == 0 {
			continue
		}
		want := "must be > 0"
		if zero {
			want = "must not be negative"
		}
		fmt.Fprintf(stderr, "e2a %s: --%s %v: %s\n\n", fs.Name(), name, d, want)
		printHelp(stderr, fs)
		return errFlags
	}
	return nil
}

// auditConnect connects to E2A_NATS_URL for the operator commands (no
// embedded server: they read a running pipeline).
func auditConnect(ctx context.Context, cfg Config, name string) (*nats.Conn, error) {
	if cfg.NatsURL == "" {
		return nil, fmt.Errorf("%s reads a running pipeline and needs E2A_NATS_URL: for `e2a dev`, the NATS URL it prints at start (nats://127.0.0.1:4222 with the default E2A_NATS_PORT), e.g. export E2A_NATS_URL=nats://127.0.0.1:4222", name)
	}
	cc := cfg.ConnConfig
	if cc.Name == "" {
		cc.Name = "e2a-" + name
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return connectNATS(cctx, cc, commandConnEvents().Options()...)
}

// ndjson writes records one a line.
func ndjson(w io.Writer) func(audit.Record) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return func(r audit.Record) error { return enc.Encode(r) }
}

// runReplay is `e2a replay`.
func runReplay(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var q audit.Query
	var ids stringList
	var source string
	var partitions int
	fs.Var(&ids, "request", "request id (repeatable; arguments work too)")
	fs.StringVar(&q.TaskID, "task", "", "requests of this task_id")
	fs.StringVar(&q.ContextID, "context", "", "requests of this context_id")
	fs.StringVar(&q.SessionID, "session", "", "requests of this session_id")
	fs.StringVar(&q.Pool, "pool", "", "requests of this agent pool")
	fs.Var(timeFlag{&q.Since}, "since", "stored at or after: RFC 3339 time or a duration ago (2h)")
	fs.Var(timeFlag{&q.Until}, "until", "stored at or before: RFC 3339 time or a duration ago")
	fs.StringVar(&source, "source", "auto", "auto (hot streams, then E2A_AUDIT, then E2A_ARCHIVE), hot, or audit (E2A_AUDIT, then E2A_ARCHIVE)")
	fs.IntVar(&q.Limit, "limit", 1000, "at most this many requests found by filters (0: no limit); ids given are all read unless it is set")
	fs.BoolVar(&q.NoFrames, "no-frames", false, "print envelopes and summaries only (frames are still checked)")
	fs.IntVar(&partitions, "partitions", 0, "E2A_AUDIT partitions, 1..1024 (default: read from the stream)")
	if err := parseFlagsAnywhere(fs, args, -1); err != nil {
		return err
	}
	q.RequestIDs = append(ids, fs.Args()...)
	if len(q.RequestIDs) > 0 && !flagSet(fs, "limit") {
		q.Limit = 0 // every id asked for, not the first 1000
	}
	q.Source = audit.Source(source)
	if err := q.Validate(); err != nil {
		// In the command's words, not the library's sentinel ("audit:
		// invalid query").
		msg := strings.TrimPrefix(err.Error(), audit.ErrQuery.Error()+": ")
		if len(q.RequestIDs) == 0 && q.TaskID == "" && q.ContextID == "" && q.SessionID == "" && q.Pool == "" && q.Since.IsZero() && q.Until.IsZero() {
			msg += ", e.g. e2a replay req-42 or e2a replay --task task-7"
		}
		return fmt.Errorf("%w: replay: %s (e2a replay -h lists the flags)", errArgs, msg)
	}
	nc, err := auditConnect(ctx, cfg, "replay")
	if err != nil {
		return err
	}
	defer nc.Close()
	var opts []audit.Option
	if flagSet(fs, "partitions") {
		// Given, it is used or refused (1..1024): 0 or a negative one
		// read the stream's count without a word.
		opts = append(opts, audit.WithAuditPartitions(partitions))
	}
	a, err := audit.New(nc, opts...)
	if errors.Is(err, audit.ErrInvalidOption) {
		return fmt.Errorf("%w: --partitions: %w", errArgs, err) // a bad argument, not a read failure
	}
	if err != nil {
		return err
	}
	st, err := a.Replay(ctx, q, ndjson(stdout))
	fmt.Fprintf(stderr, "replay: %s (%d complete, %d incomplete, %d without frames, %d not found), %s, %d with violations\n",
		counted(st.Requests, "request"), st.Complete, st.Incomplete, st.NoFrames, st.NotFound, counted(st.Frames, "frame"), st.Violations)
	if err == nil && q.Limit > 0 && st.Requests >= q.Limit {
		// Not silent: the output ends where the limit did, not where the
		// matches do.
		fmt.Fprintf(stderr, "replay: stopped at --limit %d; more requests may match (raise --limit, 0 for none, or narrow the filters)\n", q.Limit)
	}
	if err != nil {
		return err
	}
	if st.Violations > 0 {
		return errViolations
	}
	if st.Requests == 0 {
		return fmt.Errorf("%w: no request matched", errNotFound)
	}
	if st.NotFound > 0 {
		return fmt.Errorf("%w: %d of the requests asked for", errNotFound, st.NotFound)
	}
	return nil
}

// minTailPoll is the shortest --poll of e2a tail.
const minTailPoll = 10 * time.Millisecond

// runTail is `e2a tail`.
func runTail(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	var o audit.TailOptions
	fs.StringVar(&o.Pool, "pool", "", "only requests of this agent pool")
	fs.StringVar(&o.TaskID, "task", "", "only requests of this task_id")
	fs.StringVar(&o.ContextID, "context", "", "only requests of this context_id")
	fs.StringVar(&o.SessionID, "session", "", "only requests of this session_id")
	fs.Var(timeFlag{&o.Since}, "since", "start with the requests stored since: RFC 3339 time or a duration ago")
	fs.DurationVar(&o.PollInterval, "poll", 200*time.Millisecond, "how often new requests are read (at least 10ms)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := checkPositive(fs, stderr, "poll"); err != nil {
		return err
	}
	if o.PollInterval < minTailPoll {
		// --poll 1ns read the streams without a pause: a core of CPU
		// and as many requests to the servers.
		return usageError(fs, fmt.Sprintf("--poll %v: at least %v", o.PollInterval, minTailPoll))
	}
	if o.Pool != "" {
		// A bad argument (exit 2) as for replay, not a read failure.
		if err := subjects.ValidatePool(o.Pool); err != nil {
			return fmt.Errorf("%w: %w", errArgs, err)
		}
	}
	nc, err := auditConnect(ctx, cfg, "tail")
	if err != nil {
		return err
	}
	defer nc.Close()
	a, err := audit.New(nc)
	if err != nil {
		return err
	}
	if o.Pool != "" {
		// A typo in --pool otherwise showed nothing, for ever.
		warnUnknownPool(ctx, nc, "tail", o.Pool, nil, stderr)
	}
	// A poll that got no answer (the server restarting) is logged on
	// stderr; tail goes on.
	o.Log = slog.New(slog.NewTextHandler(stderr, nil))
	return a.Tail(ctx, o, ndjson(stdout))
}

// runPublish is `e2a publish`.
func runPublish(ctx context.Context, cfg Config, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	var o audit.PublishOptions
	var follow bool
	var wait time.Duration
	fs.StringVar(&o.Pool, "pool", "", "agent pool (default: E2A_DEFAULT_POOL)")
	fs.StringVar(&o.RequestID, "request-id", "", "request id for an envelope without one (default: a UUIDv7)")
	fs.StringVar(&o.Traceparent, "traceparent", "", "W3C traceparent to set on the request")
	fs.StringVar(&o.Tracestate, "tracestate", "", "W3C tracestate (with --traceparent)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "wait for the PubAck at most this long")
	fs.BoolVar(&follow, "follow", false, "print the frames of each request until its final frame")
	fs.DurationVar(&wait, "wait", time.Minute, "with --follow: give up when no frame comes for this long")
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if err := checkPositive(fs, stderr, "timeout", "wait"); err != nil {
		return err
	}
	if err := checkPublishFlags(fs, o); err != nil {
		return err
	}
	in := stdin
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	o.Routes = normalizer.Routes{Default: cfg.DefaultPool}
	nc, err := auditConnect(ctx, cfg, "publish")
	if err != nil {
		return err
	}
	defer nc.Close()
	emit := ndjson(stdout)
	dec := json.NewDecoder(in)
	violations := false
	warned := map[string]bool{}
	for n := 1; ; n++ {
		var body json.RawMessage
		if err := dec.Decode(&body); err == io.EOF {
			if n == 1 {
				return errors.New("publish: no envelope in the input")
			}
			break
		} else if err != nil {
			return fmt.Errorf("publish: envelope %d: %w", n, err)
		}
		acc, err := audit.Publish(ctx, nc, body, o)
		if err != nil {
			return fmt.Errorf("publish: envelope %d: %w", n, err)
		}
		if err := emit(acc); err != nil {
			return err
		}
		warnUnknownPool(ctx, nc, "publish", acc.Pool, warned, stderr)
		if follow {
			sum, err := audit.Follow(ctx, nc, acc.RequestID, wait, emit)
			if err != nil {
				return err
			}
			violations = violations || !sum.OK()
		}
	}
	if violations {
		return errViolations
	}
	return nil
}

// warnUnknownPool tells stderr, once per pool (warned, nil for a single
// look), that no worker of pool has ever started on this NATS server (no
// durable consumer agent-<pool> on E2A_REQUESTS). For publish, the request
// is stored, as a direct publisher's is, and waits for one, where ingress
// answers such a pool unknown_agent; a typo in --pool otherwise showed
// nothing, and --follow gave up after --wait. For tail (cmd "tail"), a
// typo in --pool showed nothing for ever; tail goes on (a worker may
// start). A lookup that fails otherwise (a NATS user not allowed the
// consumer's info, whose request goes unanswered: at most a second) says
// nothing.
func warnUnknownPool(ctx context.Context, nc *nats.Conn, cmd, pool string, warned map[string]bool, stderr io.Writer) {
	name, err := streams.AgentConsumerName(pool)
	if err != nil || warned[pool] {
		return
	}
	if warned != nil {
		warned[pool] = true
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := js.Consumer(ctx, streams.RequestsStream, name); errors.Is(err, jetstream.ErrConsumerNotFound) {
		what := "the request waits until one does"
		if cmd == "tail" {
			what = "nothing of it shows until one does"
		}
		fmt.Fprintf(stderr, "e2a %s: no worker of pool %q has ever started on this NATS server (no consumer %s on %s): "+
			"%s; check the name, or start `e2a agent --pool %s`\n", cmd, pool, name, streams.RequestsStream, what, pool)
	}
}

// checkPublishFlags refuses, as bad arguments (exit 2) before connecting,
// what publish would refuse only after connecting (a --pool or
// --request-id that is none, exit 1) or drop without a word: a
// --traceparent that is no W3C traceparent and its --tracestate, a
// --tracestate without --traceparent or outside the W3C limits (each door
// drops them, e2a.CleanTrace; here the operator typed them).
func checkPublishFlags(fs *flag.FlagSet, o audit.PublishOptions) error {
	if o.Pool != "" {
		if err := subjects.ValidatePool(o.Pool); err != nil {
			return usageError(fs, fmt.Sprintf("--pool: %v", err))
		}
	}
	if o.RequestID != "" {
		if err := subjects.ValidateRequestID(o.RequestID); err != nil {
			return usageError(fs, fmt.Sprintf("--request-id: %v", err))
		}
	}
	switch {
	case o.Traceparent != "" && !e2a.ValidTraceparent(o.Traceparent):
		return usageError(fs, fmt.Sprintf("--traceparent %q is no W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", o.Traceparent))
	case o.Tracestate != "" && o.Traceparent == "":
		return usageError(fs, "--tracestate goes with --traceparent")
	case o.Tracestate != "" && e2a.CleanTracestate(o.Tracestate) != o.Tracestate:
		return usageError(fs, fmt.Sprintf("--tracestate %q is no W3C tracestate (key=value,…, within its limits)", o.Tracestate))
	}
	return nil
}

// The audit commands' help (see parseFlags).
var (
	replayHelp = commandHelp{usage: "e2a replay [flags] [REQUEST_ID ...]",
		about: `Prints, as NDJSON, the envelope, every frame and a summary of each request selected, read from
E2A_REQUESTS/E2A_RESPONSES and from E2A_AUDIT for what they no longer hold, and checks the frame
invariants (sequence from 0 without gap or repeat, exactly one final frame, last; valid frames; headers
agreeing with frames; an envelope for the frames stored). Select requests by id (arguments or --request),
or by --task, --context, --session, --pool and a time range (--since, --until).
Every id given is read (--limit bounds them only when set). Exit status: 0 all found and sound, 1 a
request breaks an invariant (or the streams cannot be read), 2 bad arguments (no selection, an unknown
--source, --until before --since, an invalid pool or id), 3 a request was not found (or nothing matched).`,
		env: fmt.Sprintf(natsEnv, "required (the audit user in production)")}
	tailHelp = commandHelp{usage: "e2a tail [flags]",
		about: `Follows live traffic until interrupted: new requests (read from E2A_REQUESTS) and their frames
(e2a.live.>), as NDJSON, each request closed by a summary with its invariant checks when its final
frame arrives. A --pool no worker has ever started on (no consumer agent-<pool>: a typo?) is said on
stderr; tail goes on. Exit status: 0 when interrupted, 1 when the streams cannot be read (it rides out a NATS
outage) or the output cannot be written, 2 bad arguments (an invalid pool, flag or value).`,
		env: fmt.Sprintf(natsEnv, "required (the audit user in production)")}
	publishHelp = commandHelp{usage: "e2a publish [flags] [FILE|-]",
		about: `Publishes E2A envelopes (or legacy AgentRequests) read from FILE or stdin (one JSON object, or several
one after the other, e.g. NDJSON) straight onto e2a.req.<pool>.<request_id>, as a direct publisher does
(E2A-Request-Id, and Nats-Msg-Id = the request id: the same id within E2A_DEDUPE_WINDOW is one request),
and prints each PubAck as an "accepted" record. Secrets are stripped as ingress does. A pool no worker
has ever started on (no consumer agent-<pool>: a typo?) is said on stderr; its request waits for one. With
--follow, prints the frames of each request until its final frame.`,
		env: fmt.Sprintf(natsEnv, "required") + "  E2A_DEFAULT_POOL          the pool when --pool is not given\n"}
)

// counted is n and noun, in the plural unless n is 1 ("1 request", "0
// frames"): the summaries a user reads said "1 requests".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

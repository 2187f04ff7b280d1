package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// usage is the global help; the built-in agents are builtinAgentPools.
var usage = `e2a — the E2A Pipeline

Usage:
  e2a dev                   run everything in one process on an embedded JetStream server
  e2a dev --a2a URL | --openai URL --model M | --http URL
                            the same, with an existing agent as its default pool ("agent", or --pool NAME)
  e2a serve                 run ingress and egress against E2A_NATS_URL
  e2a agent --pool NAME     run a built-in agent pool (` + strings.Join(builtinAgentPools, ", ") + `) against E2A_NATS_URL
  e2a agent --pool NAME --a2a URL | --openai URL --model M | --http URL
                            put an existing agent behind the pipeline as pool NAME
  e2a acp [--pool NAME]     an ACP agent on stdio for editors (E2A_NATS_URL, or embedded + demo agent)
  e2a acp --a2a URL | --openai URL --model M | --http URL
                            the same, embedded, with an existing agent answering the editor
  e2a streams apply         create or update streams and KV buckets on E2A_NATS_URL
  e2a replay [ID...]        print requests and frames from the durable streams, check invariants (-h for filters)
  e2a tail                  follow live requests and frames on E2A_NATS_URL
  e2a publish [FILE|-]      publish envelopes straight onto the request subjects (--follow for frames)
  e2a bench [flags]         load benchmark: the whole pipeline in process, or --target URL (-h for flags)
  e2a vault key|seal|rotate seal workflow credentials for the encrypted vault (-h for details)
  e2a push [dead|redeliver] run the push notification delivery stage; list or redeliver dead-lettered updates
  e2a archive               run the archiver: E2A_AUDIT compressed into E2A_ARCHIVE (the audit history)
  e2a help [COMMAND]        this text, or a command's help

Configuration comes from E2A_* environment variables (see README); e2a COMMAND -h
(or e2a help COMMAND) shows a command's flags and the variables it reads.
`

// Exit codes: 0 success (help included), 1 failure, 2 bad arguments, 3
// nothing found (e2a replay of unknown ids).
const (
	exitFailure  = 1
	exitUsage    = 2
	exitNotFound = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:]), os.Stderr))
}

// exitCode reports err and returns the process's exit code.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		if msg, ok := strings.CutPrefix(err.Error(), errUsage.Error()+": "); ok {
			fmt.Fprintf(stderr, "e2a: %s\n\n", msg) // what was wrong, before the usage
		}
		fmt.Fprint(stderr, usage)
		return exitUsage
	case errors.Is(err, errFlags):
		return exitUsage // already reported with the command's own usage
	case errors.Is(err, errArgs):
		fmt.Fprintln(stderr, "e2a:", err)
		return exitUsage
	case errors.Is(err, errNotFound):
		fmt.Fprintln(stderr, "e2a:", err)
		return exitNotFound
	}
	fmt.Fprintln(stderr, "e2a:", err)
	return exitFailure
}

var (
	// errUsage: no or an unknown subcommand; the global usage is printed,
	// after what wraps it ("unknown command …").
	errUsage = errors.New("usage")
	// errHelp: a subcommand's help was printed on request (exit 0).
	errHelp = errors.New("help printed")
	// errFlags: a subcommand's arguments were wrong; the error and the
	// subcommand's usage were printed (exit 2).
	errFlags = errors.New("bad arguments")
	// errArgs: arguments that parse but ask for nothing valid (exit 2,
	// the error printed).
	errArgs = errors.New("bad arguments")
	// errNotFound: what was asked for does not exist (exit 3).
	errNotFound = errors.New("not found")
)

// commandHelp is a subcommand's own help.
type commandHelp struct {
	usage string // the synopsis, after "Usage: "
	about string // what it does
	env   string // the environment variables it reads
}

// memoryLimitEnv is E2A_MEMORY_LIMIT's entry in the help of every command
// that runs a stage (the manifests set it for each; run applies it before
// any command, and startStage logs the limit in effect).
const memoryLimitEnv = `  E2A_MEMORY_LIMIT          the container's memory limit in bytes: Go's memory limit is set to 90 % of it
                            (unless GOMEMLIMIT is set)
`

// natsEnv is the connection part of every subcommand's environment.
const natsEnv = `  E2A_NATS_URL              the NATS cluster (nats://host:4222); %s
  E2A_NATS_CREDS, E2A_NATS_USER, E2A_NATS_PASSWORD, E2A_NATS_NKEY
                            credentials for that cluster
  E2A_NATS_TLS_CA, E2A_NATS_TLS_CERT, E2A_NATS_TLS_KEY
                            TLS for that cluster
  E2A_NATS_INBOX_PREFIX     the connection's reply subjects (default _INBOX.<E2A_NATS_USER>)
`

var helps = map[string]commandHelp{
	"dev": {usage: "e2a dev [--pool NAME] [--a2a CARD-URL | --openai BASE-URL --model M [--system S] | --http URL]",
		about: "Runs the whole pipeline in one process: an embedded NATS JetStream server, ingress, egress,\nthe console, the demo agent pool and the workflow pool. Prints the URLs it serves. With --a2a, --openai or\n" +
			"--http, an agent you already run is a pool of its own in the same process, as `e2a agent` would bridge it\n" +
			"(the E2A_UPSTREAM_* variables apply), and the default pool unless E2A_DEFAULT_POOL names another.",
		env: fmt.Sprintf(natsEnv, "empty = the embedded server") + `  E2A_HTTP_ADDR             HTTP listener (default 127.0.0.1:8080)
  E2A_METRICS_ADDR          its own listener for /metrics and /debug/pprof/ (then /metrics not on E2A_HTTP_ADDR)
  E2A_NATS_PORT             embedded server's client port (default 4222; 0 = random)
  E2A_STORE_DIR             embedded server's store (default: a temporary directory)
  E2A_ARCHIVE               run the archiver (E2A_AUDIT into E2A_ARCHIVE) in this process (default false)
` + memoryLimitEnv + `  E2A_AUTH_*, E2A_API_KEYS  auth (ingress/AUTH.md); and every E2A_* of docs/configuration.md
`},
	"serve": {usage: "e2a serve", about: "Runs ingress and egress (and the console) against a NATS cluster; run any number of replicas.",
		env: fmt.Sprintf(natsEnv, "required") + `  E2A_HTTP_ADDR             HTTP listener (default 127.0.0.1:8080)
  E2A_METRICS_ADDR          its own listener for /metrics and /debug/pprof/ (then /metrics not on E2A_HTTP_ADDR)
` + memoryLimitEnv + `  E2A_AUTH_*, E2A_API_KEYS  auth (ingress/AUTH.md); and every E2A_* of docs/configuration.md
`},
	"agent": {usage: "e2a agent [--pool " + strings.Join(builtinAgentPools, "|") + "] [--concurrency N]\n       e2a agent --pool NAME (--a2a CARD-URL | --openai BASE-URL --model M [--system S] | --http URL)",
		about: "Runs an agent pool against a NATS cluster, with /metrics, /healthz and /readyz: a built-in one, or a bridge\n" +
			"that puts an existing agent behind the pipeline (an A2A server, an OpenAI-compatible model server, any HTTP\n" +
			"service answering E2A frames): every request's upstream answer becomes its durable, ordered frames.",
		env: fmt.Sprintf(natsEnv, "empty = an embedded server") + `  E2A_NATS_PORT             the embedded server's client port (default 4222; 0 = random)
  E2A_STORE_DIR             the embedded server's store (default: a temporary directory)
  E2A_HTTP_ADDR             operations listener (default 127.0.0.1:8080)
  E2A_METRICS_ADDR          its own listener for /metrics and /debug/pprof/ (then /metrics not on E2A_HTTP_ADDR)
  E2A_AGENT_ACK_WAIT        how long a request may go without this worker's heartbeat before another takes
                            it over (default 4s, as --ack-wait; the same for every worker of a pool)
  E2A_AGENT_WORKER_ID       this worker's id in its logs and its frames' provenance (default: random)
  E2A_AGENT_DRAIN_TIMEOUT   how long a stopping worker (SIGTERM) lets its requests run before it hands the
                            rest back to the pool (default 25s; 0 = at once)
  E2A_AGENT_DEADLINE        a bound on every request of the pool from when it was stored (e.g. 10m; default 0 =
                            none): past it the request ends deadline_exceeded, its upstream call cancelled
` + memoryLimitEnv + `  E2A_WORKFLOW_*            the workflow pool's policy, vault and cache (workflow/doc.go)
  E2A_UPSTREAM_KIND, E2A_UPSTREAM_URL, E2A_UPSTREAM_MODEL, E2A_UPSTREAM_SYSTEM
                            the upstream, as the flags give it (the flags win)
  E2A_UPSTREAM_API_KEY      sent upstream as "Authorization: Bearer <key>", or in the header an A2A agent's card
                            asks for an API key in (never logged or stored)
  E2A_UPSTREAM_HEADERS      extra headers sent upstream, "Name: value; Name2: value2"
  E2A_UPSTREAM_OAUTH_TOKEN_URL, E2A_UPSTREAM_OAUTH_CLIENT_ID, E2A_UPSTREAM_OAUTH_CLIENT_SECRET
                            bearer tokens from an OAuth 2.0 token endpoint (client-credentials grant),
                            asked again before they expire, instead of a fixed key; with
                            E2A_UPSTREAM_OAUTH_SCOPES and E2A_UPSTREAM_OAUTH_AUDIENCE (never logged); for an
                            A2A agent, without _TOKEN_URL: the endpoint and scopes its card's client-credentials
                            flow names (on its host or one of E2A_UPSTREAM_ALLOWED_HOSTS)
  E2A_UPSTREAM_CONNECT_TIMEOUT (5s), E2A_UPSTREAM_IDLE_TIMEOUT (60s), E2A_UPSTREAM_MAX_IN_FLIGHT (64),
  E2A_UPSTREAM_RETRIES (3), E2A_UPSTREAM_RETRY_BASE (200ms), E2A_UPSTREAM_RETRY_MAX (10s)
                            timeouts, bound and retries (retried only before the first frame)
  E2A_UPSTREAM_MAX_ANSWER_BYTES
                            bound on the bytes of one upstream answer's frames (default 67108864 = 64 MiB,
                            at least 1024); past it the request ends upstream_protocol_error
  E2A_UPSTREAM_NAME, E2A_UPSTREAM_DESCRIPTION
                            the pool's name and description in its agent card
  E2A_UPSTREAM_CARD_REFRESH how often an A2A upstream's card is read again (default 5m; 0 = at start only)
  E2A_UPSTREAM_TLS_CA, E2A_UPSTREAM_TLS_CERT, E2A_UPSTREAM_TLS_KEY
                            an https upstream's authority (default: the system's roots, which SSL_CERT_FILE
                            can name) and the client certificate for one that asks for it (mutual TLS)
  E2A_UPSTREAM_ALLOWED_HOSTS
                            hosts (comma-separated, host or host:port) besides the URL's own where an A2A
                            upstream's card may put the interface called with the credentials, or the OAuth
                            token endpoint the client's credentials go to (default: none)
  E2A_UPSTREAM_INPUT_MODES  media types an A2A file part to the pool may have, as --input-modes gives them
                            (the flag wins; default: an A2A upstream's own card's, else text/plain,application/json)
  E2A_UPSTREAM_PARAMS       with --openai: a JSON object of request members sent with every call
                            ({"temperature":0.2,"max_tokens":1024}; a request's params replace them, a token limit is capped)
`},
	"acp": {usage: "e2a acp [--pool NAME] [--a2a CARD-URL | --openai BASE-URL --model M [--system S] | --http URL]",
		about: "Speaks ACP on stdin/stdout (logs on stderr), for editors that spawn an agent. Without E2A_NATS_URL it embeds the\n" +
			"pipeline with the demo agent, or with --a2a, --openai or --http the agent you already run, bridged as `e2a agent`\n" +
			"would bridge it (the E2A_UPSTREAM_* variables apply): the editor's sessions durable, multi-turn from their history.",
		env: fmt.Sprintf(natsEnv, "empty = an embedded server with the demo agent or the upstream") + `  E2A_DEFAULT_POOL, E2A_ROUTES
                            where prompts go
  E2A_API_KEYS, E2A_BEARER_TOKENS, E2A_AUTH_*, E2A_OAUTH2_*
                            the pipeline's auth, as e2a serve reads it (default: none, every prompt anonymous)
  E2A_ACP_API_KEY           under that auth, the editor's API key: e2a acp acts as its principal (checked at
                            start, where a missing or refused one stops it, and for each message; never logged)
  E2A_ACP_BEARER_TOKEN      or its bearer token or OAuth 2.0 access token, instead
`},
	"streams": {usage: "e2a streams apply", about: "Creates or updates every stream and KV bucket (run it as the NATS admin user, first).",
		env: fmt.Sprintf(natsEnv, "required") + `  E2A_REPLICAS              replicas of every stream (3 in production)
  E2A_REQUESTS_MAX_AGE, E2A_RESPONSES_MAX_AGE, E2A_REQUESTS_MAX_BYTES, E2A_RESPONSES_MAX_BYTES,
  E2A_CONTROL_MAX_BYTES, E2A_DEDUPE_WINDOW, E2A_TASKS_TTL, E2A_AUDIT_MAX_AGE, E2A_AUDIT_MAX_BYTES,
  E2A_ARCHIVE_MAX_AGE, E2A_ARCHIVE_MAX_BYTES, E2A_INDEX_MAX_BYTES, E2A_KV_MAX_BYTES
                            the streams' and buckets' limits (use the same values everywhere)
  E2A_REQUESTS_COMPRESSION, E2A_RESPONSES_COMPRESSION, E2A_AUDIT_COMPRESSION
                            none or s2 (docs/capacity.md)
`},
	"vault": {usage: "e2a vault key | seal CREDENTIAL-ID < value | rotate CREDENTIALS-FILE",
		about: "Seals workflow credentials for the encrypted vault (AES-256-GCM; the first key seals, every key opens):\n" +
			"key prints a new random key, seal prints the value read on stdin sealed for that credential id,\n" +
			"rotate re-seals every value of a credentials file with the first key (rotation: put the new key first,\n" +
			"rotate, then remove the old key).",
		env: `  E2A_WORKFLOW_VAULT_KEYS   comma-separated base64 keys (the first one seals)
  E2A_WORKFLOW_VAULT_KEY_FILE
                            a file with one key per line, instead
`},
	"push":    pushHelp,
	"archive": archiveHelp,
	"replay":  replayHelp,
	"tail":    tailHelp,
	"publish": publishHelp,
	"bench": {usage: "e2a bench [flags]", about: "Load benchmark: the whole pipeline in this process, or running endpoints with --target;\n--peer a2a-go compares with the A2A reference server, --bridge openai measures what a bridge adds to its upstream,\n--duration/--rate soaks at a fixed rate.",
		env: "  none (flags only)\n"},
}

// parseFlags parses a subcommand's flags. -h, -help or --help print the
// subcommand's own help on stdout (errHelp: exit 0); a wrong flag or an
// unexpected argument prints the error and that help on stderr (errFlags:
// exit 2). maxArgs bounds the positional arguments (-1: any).
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	return checkParsed(fs, err, maxArgs)
}

// parseFlagsAnywhere is parseFlags for a command whose arguments are ids
// (e2a replay): flags may follow them (`e2a replay req-42 --no-frames`:
// the flag package stopped at the id and read the flag as a second id);
// an argument that starts with "-" is an id only after "--".
func parseFlagsAnywhere(fs *flag.FlagSet, args []string, maxArgs int) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	var err error
	for {
		if err = fs.Parse(args); err != nil {
			break
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // after "--": arguments only
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if err == nil {
		err = fs.Parse(append([]string{"--"}, pos...)) // fs.Args() = the arguments; the flags stay set
	}
	return checkParsed(fs, err, maxArgs)
}

// checkParsed answers a parse's outcome err: help, a bad flag, too many
// arguments (maxArgs < 0: any number).
func checkParsed(fs *flag.FlagSet, err error, maxArgs int) error {
	if err == nil && slices.ContainsFunc(fs.Args(), func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		// A help flag after the action (`e2a vault seal -h`): the flag
		// package stops at the first argument.
		err = flag.ErrHelp
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(os.Stdout, fs)
		return errHelp
	case err != nil:
		return usageError(fs, err.Error()+addrFlagHint(err))
	case maxArgs >= 0 && fs.NArg() > maxArgs:
		return usageError(fs, fmt.Sprintf("unexpected argument %q", fs.Arg(maxArgs)))
	}
	return nil
}

// addrFlagHint is what the refusal of an unknown flag for an address or a
// port (`e2a dev --port 9000`, a newcomer's first try) adds: they are
// environment variables, which the help after it lists far down.
func addrFlagHint(err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	name = strings.ToLower(name)
	for _, w := range []string{"port", "addr", "listen", "host", "bind"} {
		if strings.Contains(name, w) {
			return "; addresses and ports are environment variables, not flags: E2A_HTTP_ADDR=127.0.0.1:9000 (HTTP), " +
				"E2A_NATS_PORT (the embedded NATS server's) or E2A_NATS_URL (a running one)"
		}
	}
	return ""
}

// usageError prints msg and the help of fs's command on stderr and returns
// errFlags (exit 2): a command's refusal of its arguments.
func usageError(fs *flag.FlagSet, msg string) error {
	fmt.Fprintf(os.Stderr, "e2a %s: %s\n\n", fs.Name(), msg)
	printHelp(os.Stderr, fs)
	return errFlags
}

// printHelp writes a subcommand's usage, what it does, its flags and the
// environment variables it reads.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	h := helps[fs.Name()]
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", h.usage, h.about)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if h.env != "" {
		fmt.Fprintf(w, "\nEnvironment:\n%s", h.env)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cfg, err := LoadConfig()
	if err != nil && !configFree(args) {
		return err
	}
	if err == nil {
		// Before any command allocates: E2A_MEMORY_LIMIT's 90 % as Go's
		// memory limit (unless GOMEMLIMIT is set).
		cfg.applyMemoryLimit()
	}
	switch args[0] {
	case "dev":
		return runDev(ctx, cfg, args[1:])
	case "serve":
		return runServe(ctx, cfg, args[1:])
	case "agent":
		return runAgent(ctx, cfg, args[1:])
	case "acp":
		return runACP(ctx, cfg, args[1:])
	case "streams":
		return runStreams(ctx, cfg, args[1:])
	case "replay":
		return runReplay(ctx, cfg, args[1:], os.Stdout, os.Stderr)
	case "tail":
		return runTail(ctx, cfg, args[1:], os.Stdout, os.Stderr)
	case "publish":
		return runPublish(ctx, cfg, args[1:], os.Stdin, os.Stdout, os.Stderr)
	case "bench":
		return runBench(ctx, cfg, args[1:])
	case "vault":
		return runVault(ctx, cfg, args[1:], os.Stdin, os.Stdout)
	case "push":
		return runPush(ctx, cfg, args[1:], os.Stdout)
	case "archive":
		return runArchive(ctx, cfg, args[1:])
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" {
			return helpOf(ctx, args[1:])
		}
		fmt.Print(usage)
		return nil
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// helpOf is `e2a help COMMAND [ACTION]`: the command's own help, as
// `e2a COMMAND [ACTION] -h` prints it (exit 0); an unknown command (or a
// flag) is errUsage.
func helpOf(ctx context.Context, cmd []string) error {
	switch cmd[0] {
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return nil
	}
	return run(ctx, append(slices.Clone(cmd), "-h"))
}

// configFree reports whether the command args runs needs no
// configuration, so that a bad E2A_* value does not stop it: help (of e2a
// or of a command), e2a bench (flags only) and e2a vault (its own
// variables).
func configFree(args []string) bool {
	switch args[0] {
	case "help", "-h", "--help", "bench", "vault":
		return true
	}
	return slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
}

// setFlags lists the flags given on the command line ("--name").
func setFlags(fs *flag.FlagSet) []string {
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, "--"+f.Name) })
	return set
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

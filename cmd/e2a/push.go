package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/push"
)

var pushHelp = commandHelp{usage: "e2a push\n       e2a push dead [--principal P [--task T [--config C]]] [--limit N]\n       e2a push redeliver [--principal P [--task T [--config C]]]",
	about: `Runs the push notification delivery stage against a NATS cluster (any number of replicas share the
work; e2a dev and e2a serve run it too unless E2A_PUSH is api or off), with /metrics, /healthz and
/readyz.
dead lists the task updates given up on (NDJSON, no credentials); redeliver posts them again to their
webhooks, each config's in order, and takes a config whose updates all went out out of dead-letter mode.
Without --principal both act on every principal's updates (--task and --config need it; --principal ""
is the anonymous principal).`,
	env: fmt.Sprintf(natsEnv, "required") + `  E2A_HTTP_ADDR             operations listener (default 127.0.0.1:8080)
  E2A_METRICS_ADDR          its own listener for /metrics and /debug/pprof/ (then /metrics not on E2A_HTTP_ADDR)
  E2A_PUSH                  e2a dev and e2a serve: "on" (default) serve the push config methods and run the stage;
                            "api" serve the methods, leave delivery to e2a push; "off" neither (no E2A_PUSH
                            bucket; the card says pushNotifications false)
  E2A_PUSH_ALLOW_HOSTS      host[:port] patterns (comma separated, *.domain) whose webhooks may use http and
                            private or loopback addresses (e2a dev adds localhost, 127.0.0.1 and [::1])
  E2A_PUSH_RETRY_WINDOW     how long an update is retried before it is dead-lettered (default 24h)
  E2A_PUSH_TIMEOUT          one delivery's timeout (default 10s)
  E2A_PUSH_ACK_WAIT         how soon a killed replica's updates go to another (default 1m, 1s..10m; a live
                            replica extends it every third of it while it delivers)
  E2A_PUSH_DEAD_SHARE       the part of E2A_PUSH_DEAD one principal's dead letters may hold (default 0.125,
                            0.01..1); over it, once the stream is half full, its oldest are removed
  E2A_PUSH_MAX_TASKS_PER_PRINCIPAL
                            tasks with push configs one principal may have (default 1000, 1..10000); a
                            finished task's configs hold its place until deleted or E2A_TASKS_TTL
  E2A_PUSH_SIGNING_KEY      file of an Ed25519 private key (PKCS #8 PEM): every delivery is signed (E2A-Signature,
                            detached JWS); e2a serve and e2a dev serve the public key at /.well-known/jwks.json
  E2A_PUSH_SEAL_KEY         file of a key (base64 of 32 bytes: openssl rand -base64 32) sealing the configs'
                            webhook URLs, tokens and credentials in E2A_PUSH (AES-256-GCM); the same file for e2a serve and
                            e2a push. Unset: stored as given (a warning at start)
` + memoryLimitEnv}

// pushEnv is the push stage's part of the environment.
type pushEnv struct {
	Push        string        `envconfig:"E2A_PUSH"` // pushOn, pushAPI or pushOff ("" is pushOn)
	AllowHosts  string        `envconfig:"E2A_PUSH_ALLOW_HOSTS"`
	RetryWindow time.Duration `envconfig:"E2A_PUSH_RETRY_WINDOW" default:"24h"`
	Timeout     time.Duration `envconfig:"E2A_PUSH_TIMEOUT" default:"10s"`
	AckWait     time.Duration `envconfig:"E2A_PUSH_ACK_WAIT" default:"1m"`
	DeadShare   float64       `envconfig:"E2A_PUSH_DEAD_SHARE" default:"0.125"`
	SigningKey  string        `envconfig:"E2A_PUSH_SIGNING_KEY"`
	SealKey     string        `envconfig:"E2A_PUSH_SEAL_KEY"`
	MaxTasks    int           `envconfig:"E2A_PUSH_MAX_TASKS_PER_PRINCIPAL" default:"1000"`
}

// Values of E2A_PUSH for e2a dev and e2a serve.
const (
	pushOn  = "on"  // the push config methods and the stage
	pushAPI = "api" // the methods only: e2a push replicas deliver
	pushOff = "off" // neither, and no E2A_PUSH bucket
)

// mode is E2A_PUSH ("" is on); pushOptions refuses any other value.
func (pe pushEnv) mode() string {
	if pe.Push == "" {
		return pushOn
	}
	return pe.Push
}

// pushSigner is the signer of E2A_PUSH_SIGNING_KEY, nil when it is unset.
func pushSigner() (*push.Signer, error) {
	path := os.Getenv(push.SigningKeyEnv)
	if path == "" {
		return nil, nil
	}
	return push.LoadSigner(path)
}

// pushOptions are the push package's options from the environment; dev
// adds the loopback hosts to the allow-list.
func pushOptions(cfg Config, dev bool, reg prometheus.Registerer, log *slog.Logger) (pushEnv, []push.Option, error) {
	var pe pushEnv
	if err := envconfig.Process("", &pe); err != nil {
		return pe, nil, fmt.Errorf("config: %w", err)
	}
	switch pe.mode() {
	case pushOn, pushAPI, pushOff:
	default:
		return pe, nil, fmt.Errorf("config: E2A_PUSH=%q (on, api or off)", pe.Push)
	}
	// A refused value names its variable (push says "timeout 0s").
	opts := []push.Option{push.WithStreamsConfig(cfg.StreamsConfig()), namedOption("E2A_PUSH_RETRY_WINDOW", push.WithRetryWindow(pe.RetryWindow)),
		namedOption("E2A_PUSH_TIMEOUT", push.WithTimeout(pe.Timeout)), namedOption("E2A_PUSH_ACK_WAIT", push.WithAckWait(pe.AckWait)),
		namedOption("E2A_PUSH_DEAD_SHARE", push.WithDeadShare(pe.DeadShare)),
		namedOption("E2A_PUSH_MAX_TASKS_PER_PRINCIPAL", push.WithMaxTasksPerPrincipal(pe.MaxTasks))}
	if pe.AllowHosts != "" {
		opts = append(opts, namedOption("E2A_PUSH_ALLOW_HOSTS", push.WithAllowHosts(pe.AllowHosts)))
	}
	if pe.SigningKey != "" {
		signer, err := push.LoadSigner(pe.SigningKey)
		if err != nil {
			return pe, nil, fmt.Errorf("config: %w", err)
		}
		opts = append(opts, push.WithSigner(signer))
	}
	if pe.SealKey != "" {
		key, err := push.LoadSealKey(pe.SealKey)
		if err != nil {
			return pe, nil, fmt.Errorf("config: %w", err)
		}
		opts = append(opts, push.WithSealKey(key))
	}
	if dev {
		opts = append(opts, push.WithAllowHosts("localhost", "127.0.0.1", "[::1]"))
	}
	if reg != nil {
		opts = append(opts, push.WithRegisterer(reg))
	}
	if log != nil {
		opts = append(opts, push.WithLogger(log.With("stage", "push")))
		if pe.SealKey == "" && !dev && pe.mode() != pushOff { // off stores no config
			log.Warn("push: webhook URLs, tokens and credentials are stored in E2A_PUSH as given; set " + push.SealKeyEnv + " to seal them")
		}
	}
	return pe, opts, nil
}

// startPush runs the push stage beside dev's or serve's other stages
// unless E2A_PUSH is api or off (deploy/nats's serve user holds the
// stage's permissions); it reports whether it started, and done gets
// Run's result.
func startPush(ctx context.Context, nc *nats.Conn, cfg Config, dev bool, reg prometheus.Registerer, log *slog.Logger, done chan<- error) (bool, error) {
	pe, opts, err := pushOptions(cfg, dev, reg, log)
	if err != nil {
		return false, err
	}
	if m := pe.mode(); m != pushOn {
		log.Info("push notification stage not run here", "E2A_PUSH", m)
		return false, nil
	}
	turns, err := ingress.NewTaskTurns(nc)
	if err != nil {
		return false, err
	}
	opts = append(opts, push.WithTaskTurns(turns))
	go func() {
		if err := push.Run(ctx, nc, opts...); err != nil {
			done <- fmt.Errorf("push: %w", err)
			return
		}
		done <- nil
	}()
	return true, nil
}

// runPush runs the stage, or lists or redelivers dead-lettered updates.
func runPush(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	var f push.DeadFilter
	fs.StringVar(&f.Principal, "principal", "", "dead, redeliver: the principal (user id) whose updates")
	fs.StringVar(&f.TaskID, "task", "", "dead, redeliver: with --principal, one task's updates")
	fs.StringVar(&f.ConfigID, "config", "", "dead, redeliver: with --task, one config's updates")
	limit := fs.Int("limit", 1000, "dead: at most this many updates (1..10000)")
	if err := parseFlags(fs, args, -1); err != nil {
		return err
	}
	action := fs.Arg(0)
	if fs.NArg() > 0 {
		if err := parseFlags(fs, fs.Args()[1:], 0); err != nil {
			return err
		}
	}
	f.All = f.Principal == "" && f.TaskID == "" && f.ConfigID == ""
	switch action {
	case "":
		if set := setFlags(fs); len(set) > 0 {
			// The stage takes none: they were dropped without a word.
			return usageError(fs, fmt.Sprintf("%s: only with dead or redeliver", strings.Join(set, ", ")))
		}
		return runPushStage(ctx, cfg)
	case "dead", "redeliver":
	default:
		return usageError(fs, fmt.Sprintf("unknown action %q", action))
	}
	if err := checkDeadFlags(fs, action, *limit); err != nil {
		return err
	}
	if cfg.NatsURL == "" {
		return errors.New("push " + action + " needs E2A_NATS_URL")
	}
	_, opts, err := pushOptions(cfg, false, nil, nil)
	if err != nil {
		return err
	}
	// Provisioning says nothing here (the output is the list).
	nc, stop, _, err := connectOrEmbed(ctx, cfg, slog.New(slog.DiscardHandler), commandConnEvents(), false)
	if err != nil {
		return err
	}
	defer stop()
	if action == "dead" {
		ds, err := push.ListDead(ctx, nc, f, *limit, opts...)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, d := range ds {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		// Said on stderr (stdout stays the NDJSON list): an empty output
		// is not left to read as a command that did nothing.
		switch {
		case len(ds) == 0:
			fmt.Fprintln(os.Stderr, "push dead: no dead-lettered updates")
		case len(ds) >= *limit:
			fmt.Fprintf(os.Stderr, "push dead: stopped at --limit %d; more may be dead-lettered\n", *limit)
		}
		return nil
	}
	rep, err := push.Redeliver(ctx, nc, f, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "delivered %d, dropped %d (config gone), too large %d (not posted, removed), kept %d\n", rep.Delivered, rep.Dropped, rep.TooLarge, rep.Kept)
	for _, s := range rep.Failures {
		fmt.Fprintln(stdout, "  failed:", s)
	}
	if rep.Kept > 0 {
		return errors.New("some updates are still dead-lettered")
	}
	return nil
}

// checkDeadFlags refuses, as bad arguments (exit 2) before connecting,
// the filters and limit push dead and redeliver cannot take: a --task
// without --principal (it selected the anonymous principal's task, where
// the help nests it in --principal and says that without --principal
// every principal's updates are acted on: under auth, redeliver posted
// nothing and exited 0), a --config without --task, and a --limit out of
// 1..10000 (refused by push.ListDead only after connecting, exit 1).
// --principal "" names the anonymous principal.
func checkDeadFlags(fs *flag.FlagSet, action string, limit int) error {
	switch {
	case flagSet(fs, "task") && !flagSet(fs, "principal"):
		return usageError(fs, "--task goes with --principal (--principal \"\" for the anonymous principal)")
	case flagSet(fs, "config") && !flagSet(fs, "task"):
		return usageError(fs, "--config goes with --task")
	case action == "dead" && (limit < 1 || limit > 10000):
		return usageError(fs, fmt.Sprintf("--limit %d: want 1..10000", limit))
	case action == "redeliver" && flagSet(fs, "limit"):
		return usageError(fs, "--limit: only with dead (redeliver posts every update selected)")
	}
	return nil
}

// runPushStage is `e2a push`: the stage with its operations listener.
func runPushStage(ctx context.Context, cfg Config) error {
	log, nc, reg, stop, err := startNATSStage(ctx, cfg, "push", "e2a dev runs the stage on its embedded server")
	if err != nil {
		return err
	}
	defer stop()
	_, opts, err := pushOptions(cfg, false, reg, log)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	turns, err := ingress.NewTaskTurns(nc)
	if err != nil {
		return err
	}
	opts = append(opts, push.WithTaskTurns(turns))
	// /metrics on E2A_METRICS_ADDR alone when it is set, as every stage
	// (the push stage served it on E2A_HTTP_ADDR too).
	mux := http.NewServeMux()
	mountOps(mux, cfg, newOpsMux(reg, nc, js, pushStageNeeds()))
	return serveOps(ctx, cfg, mux, reg, log, func() error { return push.Run(ctx, nc, opts...) },
		"push notification stage running")
}

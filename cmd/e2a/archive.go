package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/obs"
)

var archiveHelp = commandHelp{usage: "e2a archive",
	about: `Runs the archiver against a NATS cluster, with /metrics, /healthz and /readyz: it reads E2A_AUDIT in
order and stores its messages as zstd-compressed batches on E2A_ARCHIVE (package archive), so that
E2A_AUDIT only buffers what is not archived yet and E2A_ARCHIVE keeps the history. It keeps no state
(it resumes after the archive's last batch); a second replica is safe but does the work twice (each
batch is stored with the subject's expected last sequence: the second copy is refused). e2a dev runs
it in its process with E2A_ARCHIVE=true. e2a replay reads the archive as part of E2A_AUDIT.`,
	env: fmt.Sprintf(natsEnv, "required") + `  E2A_HTTP_ADDR             operations listener (default 127.0.0.1:8080)
  E2A_METRICS_ADDR          its own listener for /metrics and /debug/pprof/ (then /metrics not on E2A_HTTP_ADDR)
  E2A_ARCHIVE_BATCH_BYTES   a batch is closed at this size before compression (default 1048576, 4 KiB..8 MiB)
  E2A_ARCHIVE_FLUSH_INTERVAL
                            and this long after its first message however small (default 10s, 10ms..1h)
  E2A_ARCHIVE               e2a dev: run the archiver in its process (default false)
  E2A_ARCHIVE_MAX_AGE, E2A_ARCHIVE_MAX_BYTES, E2A_AUDIT_MAX_AGE, E2A_AUDIT_MAX_BYTES
                            the streams' limits (the same everywhere: e2a streams apply sets them)
` + memoryLimitEnv}

// archiveOptions are the archiver's options from the configuration; reg
// and log may be nil.
func (c Config) archiveOptions(reg prometheus.Registerer, log *slog.Logger) []archive.Option {
	opts := []archive.Option{archive.WithBatchBytes(c.ArchiveBatchBytes), archive.WithFlushInterval(c.ArchiveFlushInterval)}
	if reg != nil {
		opts = append(opts, archive.WithRegisterer(reg))
	}
	if log != nil {
		opts = append(opts, archive.WithLogger(log.With("stage", "archive")))
	}
	return opts
}

// startArchive runs the archiver beside dev's other stages when
// E2A_ARCHIVE is true, with the process's registry and logger; it
// reports whether it started, and done gets Run's result (nil once ctx
// ends).
func startArchive(ctx context.Context, nc *nats.Conn, cfg Config, reg prometheus.Registerer, log *slog.Logger, done chan<- error) bool {
	if !cfg.Archive {
		log.Info("archiver not run here", "E2A_ARCHIVE", false)
		return false
	}
	opts := cfg.archiveOptions(reg, log)
	go func() {
		if err := archive.Run(ctx, nc, opts...); err != nil {
			done <- fmt.Errorf("archive: %w", err)
			return
		}
		done <- nil
	}()
	return true
}

// runArchive is `e2a archive`: the archiver with its operations listener,
// until ctx ends (SIGTERM, SIGINT).
func runArchive(ctx context.Context, cfg Config, args []string) error {
	if err := parseFlags(flag.NewFlagSet("archive", flag.ContinueOnError), args, 0); err != nil {
		return err
	}
	log, nc, reg, stop, err := startNATSStage(ctx, cfg, "archive", "e2a dev runs the archiver on its embedded server")
	if err != nil {
		return err
	}
	defer stop()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// Ready while connected with both streams there (the one it reads, the
	// one it writes) and while the archiver is not stalled (failing for
	// over archive.DefaultStallAfter without storing or catching up): a
	// stall is seen before E2A_AUDIT drops what was not archived.
	health := archive.NewHealth()
	ops := http.NewServeMux()
	obs.RegisterWithDetails(ops, reg, nil, append(archiveNeeds().checks(nc, js), health.Check)...)
	mux := http.NewServeMux()
	mountOps(mux, cfg, ops)
	opts := append(cfg.archiveOptions(reg, log), archive.WithHealth(health))
	return serveOps(ctx, cfg, mux, reg, log, func() error { return archive.Run(ctx, nc, opts...) },
		"archiver running", "batch_bytes", cfg.ArchiveBatchBytes, "flush_interval", cfg.ArchiveFlushInterval.String())
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// newWorkflowExecutor builds the A2E workflow executor from E2A_WORKFLOW_*
// settings, with StoreData on JetStream KV and a KV-shared cache.
func newWorkflowExecutor(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) (*workflow.Executor, error) {
	wc, opts, err := workflowOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := checkFileDir(wc.FileDir); err != nil {
		return nil, err
	}
	sc := cfg.StreamsConfig()
	sc.Storage = jetstream.FileStorage
	kv := func(name string) (jetstream.KeyValue, error) {
		kc, err := sc.KeyValueConfig(name)
		if err != nil {
			return nil, err
		}
		var kv jetstream.KeyValue
		err = streams.RetryPlacement(ctx, func(ctx context.Context) (err error) {
			kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
			return err
		})
		return kv, err
	}
	local, err := kv(streams.WorkflowLocalBucket)
	if err != nil {
		return nil, fmt.Errorf("workflow storage: %w", err)
	}
	session, err := kv(streams.WorkflowSessionBucket)
	if err != nil {
		return nil, fmt.Errorf("workflow storage: %w", err)
	}
	stores := &workflow.Stores{Local: local, Session: session, LocalQuota: opts.Limits.LocalQuota, SessionQuota: opts.Limits.SessionQuota}
	if wc.FileDir != "" {
		stores.Dir = wc.FileDir
	}
	opts.Storage = stores
	if wc.Cache == "kv" {
		cache, err := kv(streams.WorkflowCacheBucket)
		if err != nil {
			return nil, fmt.Errorf("workflow cache: %w", err)
		}
		opts.Cache = &workflow.KVCache{KV: cache}
	}
	return workflow.New(opts), nil
}

// checkFileDir refuses at start a StoreData "file" directory
// (E2A_WORKFLOW_FILE_DIR) that is not an existing directory: the pool
// would list file storage in its capabilities and validate workflows that
// use it, then fail every such StoreData ("file storage is unavailable",
// not retryable). "" (off) needs none. Only the pool checks it: serve's
// validator never opens the directory.
func checkFileDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("workflow: config: E2A_WORKFLOW_FILE_DIR %q: %w (create it, or set off)", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("workflow: config: E2A_WORKFLOW_FILE_DIR %q is not a directory (name one, or set off)", dir)
	}
	return nil
}

// egressAuthorizer lets egress's GET endpoints demand the same credentials
// as ingress. With only the none scheme every reader is the open principal
// (every request readable), but a credential presented is still checked,
// as ingress checks it (ingress/AUTH.md): a wrong one is 401 on a read as
// on a POST.
func egressAuthorizer(auth *ingress.Auth) func(*http.Request) (tenant.Principal, error) {
	return func(r *http.Request) (tenant.Principal, error) {
		// Every reader, the anonymous one of optional auth included, sees
		// only what the ownership rule allows it.
		p, err := auth.Tenant(r)
		ingress.StripCredentialHeaders(r.Header)
		return p, err
	}
}

// newWorkflowValidator builds the executor of `e2a serve`'s workflow REST
// API, which validates and describes while the workflow pool runs the
// executions: it checks structure, references, types, its limits
// (E2A_WORKFLOW_MAX_*) and the storage types the pool has (localStorage
// and sessionStorage always, file unless E2A_WORKFLOW_FILE_DIR is off),
// without opening the pool's buckets. The operation permissions, the API
// knowledge base and the credentials it leaves to the pool
// (workflow.Options.ValidateOnly), which holds the policy and the vault:
// serve needs none of the pool's settings or secrets, and holds no
// credential.
func newWorkflowValidator(cfg Config, log *slog.Logger) (*workflow.Executor, error) {
	wc, opts, err := workflowOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	kinds := workflow.StorageKinds{workflow.StorageLocal, workflow.StorageSession}
	if wc.FileDir != "" {
		kinds = append(kinds, workflow.StorageFile)
	}
	opts.Storage, opts.ValidateOnly = kinds, true
	opts.Policy, opts.Vault = nil, nil
	return workflow.New(opts), nil
}

// workflowOptions reads the E2A_WORKFLOW_* settings and the executor
// options they give (policy, vault names, limits), the same for the
// workflow pool and serve's REST API, with the localStorage and
// sessionStorage quotas of A2E_LOCAL's and A2E_SESSION's bound
// (E2A_KV_MAX_BYTES) that the pool enforces and both list in the
// capabilities.
func workflowOptions(cfg Config, log *slog.Logger) (workflow.Config, workflow.Options, error) {
	wc, err := workflow.ConfigFromEnv()
	if err != nil {
		return wc, workflow.Options{}, err
	}
	opts, err := wc.Options(os.Environ(), log)
	opts.Limits.LocalQuota = wc.LocalQuota(cfg.KVMaxBytes)
	opts.Limits.SessionQuota = wc.SessionQuota(cfg.KVMaxBytes)
	return wc, opts, err
}

// rateLimited reports whether a rate limit is set: ingress then counts
// every request in E2A_RATELIMIT, which its /readyz checks too.
func rateLimited(cfg Config) bool {
	l := cfg.rateLimits()
	return l.PerMinute > 0 || l.PerHour > 0 || l.PerDay > 0 || l.BytesPerMinute > 0 || l.BytesPerHour > 0 || l.BytesPerDay > 0
}

// rateLimits are the per-principal limits of E2A_RATE_LIMIT_*.
func (c Config) rateLimits() ingress.RateLimits {
	return ingress.RateLimits{PerMinute: c.RateLimitPerMinute, PerHour: c.RateLimitPerHour, PerDay: c.RateLimitPerDay,
		BytesPerMinute: c.RateLimitBytesPerMinute, BytesPerHour: c.RateLimitBytesPerHour, BytesPerDay: c.RateLimitBytesPerDay}
}

// limiterConfig is the rate limiter's configuration: the limits of
// E2A_RATE_LIMIT_* and the budget of cancels admitted over them
// (E2A_RATE_LIMIT_CANCELS_PER_MINUTE).
func (c Config) limiterConfig() ingress.LimiterConfig {
	return ingress.LimiterConfig{Limits: c.rateLimits(), CancelsPerMinute: c.RateLimitCancelsPerMinute}
}

// ingressOptions builds auth, rate limits and stream limits from the
// environment (E2A_AUTH_*, E2A_API_KEYS, E2A_RATE_LIMIT_*, E2A_MAX_STREAMS).
func ingressOptions(ctx context.Context, js jetstream.JetStream, cfg Config, auth *ingress.Auth) ([]ingress.Option, error) {
	var opts []ingress.Option
	if cfg.Routes != "" {
		routes, err := normalizer.ParseRoutes(cfg.Routes)
		if err != nil {
			return nil, fmt.Errorf("E2A_ROUTES: %w", err)
		}
		opts = append(opts, ingress.WithRoutes(routes))
	}
	opts = append(opts, ingress.WithAuth(auth), ingress.WithExtendedCard(cfg.ExtendedCard), ingress.WithMaxWaitingTurns(cfg.MaxWaitingTurns))
	if !cfg.AcceptUnknownPools {
		opts = append(opts, ingress.WithPoolCheck(0))
	}
	if rateLimited(cfg) {
		kv, err := ingress.EnsureRateLimitBucket(ctx, js)
		if err != nil {
			return nil, err // includes a bucket whose TTL cannot hold the day window
		}
		opts = append(opts, ingress.WithLimiter(ingress.NewLimiter(kv, cfg.limiterConfig())))
	}
	if cfg.MaxStreamsPerPrincipal > 0 {
		opts = append(opts, ingress.WithStreamLimiter(ingress.NewStreamLimiter(cfg.MaxStreamsPerPrincipal)))
	}
	return opts, nil
}

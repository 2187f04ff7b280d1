package workflow

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Config is the executor's configuration from the environment (E2A_
// variables, read with envconfig; each tag names its variable in full,
// so that an unprefixed WORKFLOW_… is never read).
type Config struct {
	// AllowedHosts: E2A_WORKFLOW_ALLOWED_HOSTS, comma-separated host[:port]
	// patterns every principal may call (any method, any path).
	AllowedHosts []string `envconfig:"E2A_WORKFLOW_ALLOWED_HOSTS"`
	// AllowedNets: E2A_WORKFLOW_ALLOWED_NETS, CIDRs that private, loopback
	// or link-local destinations may be in (none by default).
	AllowedNets []string `envconfig:"E2A_WORKFLOW_ALLOWED_NETS"`
	// PolicyFile: E2A_WORKFLOW_POLICY_FILE, the API knowledge base and
	// per-principal permissions as JSON (see [Policy]).
	PolicyFile string `envconfig:"E2A_WORKFLOW_POLICY_FILE"`
	// CredentialsFile: E2A_WORKFLOW_CREDENTIALS_FILE, the vault as JSON
	// (see [Vault.LoadVaultFile]); E2A_WORKFLOW_CREDENTIAL_<NAME> variables
	// add credentials too (see [Vault.LoadEnv]).
	CredentialsFile string `envconfig:"E2A_WORKFLOW_CREDENTIALS_FILE"`
	// VaultKeys: E2A_WORKFLOW_VAULT_KEYS, base64 32-byte AES-256 keys,
	// comma-separated; VaultKeyFile: E2A_WORKFLOW_VAULT_KEY_FILE, the same
	// one a line (added after VaultKeys). The first key seals, every key
	// opens; with any key, stored credentials must be sealed (see
	// [Keyring], [RotateVaultFile]).
	VaultKeys    []string `envconfig:"E2A_WORKFLOW_VAULT_KEYS"`
	VaultKeyFile string   `envconfig:"E2A_WORKFLOW_VAULT_KEY_FILE"`

	MaxOperations     int           `envconfig:"E2A_WORKFLOW_MAX_OPERATIONS" default:"20"`
	MaxExecutionTime  time.Duration `envconfig:"E2A_WORKFLOW_MAX_EXECUTION_TIME" default:"30s"`
	MaxResponseBytes  int64         `envconfig:"E2A_WORKFLOW_MAX_RESPONSE_BYTES" default:"1048576"`
	MaxLoopIterations int           `envconfig:"E2A_WORKFLOW_MAX_LOOP_ITERATIONS" default:"1000"`
	MaxSteps          int           `envconfig:"E2A_WORKFLOW_MAX_STEPS" default:"1000"`
	MaxRetries        int           `envconfig:"E2A_WORKFLOW_MAX_RETRIES" default:"3"`
	APICallsPerMinute int           `envconfig:"E2A_WORKFLOW_API_CALLS_PER_MINUTE" default:"30"`
	APICallsPerHour   int           `envconfig:"E2A_WORKFLOW_API_CALLS_PER_HOUR" default:"500"`
	// LocalQuotaBytes: E2A_WORKFLOW_LOCAL_QUOTA_BYTES, the bytes one
	// principal keeps in localStorage (see [Stores].LocalQuota and
	// [Config.LocalQuota]): 0 (default) a quarter of the bucket's bound,
	// -1 none.
	LocalQuotaBytes int64 `envconfig:"E2A_WORKFLOW_LOCAL_QUOTA_BYTES" default:"0"`
	// SessionQuotaBytes: E2A_WORKFLOW_SESSION_QUOTA_BYTES, the bytes one
	// principal writes to sessionStorage within the bucket's TTL (see
	// [Stores].SessionQuota and [Config.SessionQuota]): 0 (default) a
	// quarter of the bucket's bound, -1 none.
	SessionQuotaBytes int64 `envconfig:"E2A_WORKFLOW_SESSION_QUOTA_BYTES" default:"0"`
	// FileDir: E2A_WORKFLOW_FILE_DIR, the sandbox of StoreData "file".
	// Unset, ConfigFromEnv uses [DefaultFileDir]; "off" disables file
	// storage (an empty FileDir in a Config built by hand disables it too).
	FileDir string `envconfig:"E2A_WORKFLOW_FILE_DIR"`
	// ContinueOnError: E2A_WORKFLOW_CONTINUE_ON_ERROR, see
	// [Options.ContinueOnError] (default false: a failed operation stops
	// the execution).
	ContinueOnError bool `envconfig:"E2A_WORKFLOW_CONTINUE_ON_ERROR" default:"false"`
	// Cache: E2A_WORKFLOW_CACHE, "memory" (per process, default), "kv"
	// (shared; the caller passes the bucket as Options.Cache) or "off".
	Cache string `envconfig:"E2A_WORKFLOW_CACHE" default:"memory"`
}

// Keyring returns the vault keys of VaultKeys and VaultKeyFile (nil when
// there are none).
func (c Config) Keyring() (*Keyring, error) {
	keys := append([]string{}, c.VaultKeys...)
	if c.VaultKeyFile != "" {
		more, err := ReadKeyFile(c.VaultKeyFile)
		if err != nil {
			return nil, err
		}
		keys = append(keys, more...)
	}
	return ParseKeyring(keys...)
}

// ConfigFromEnv reads the configuration from the process environment.
func ConfigFromEnv() (Config, error) {
	var c Config
	if err := envconfig.Process("", &c); err != nil {
		return c, fmt.Errorf("workflow: config: %w", err)
	}
	switch c.FileDir {
	case "off":
		c.FileDir = ""
	case "":
		dir, err := DefaultFileDir()
		if err != nil {
			return c, fmt.Errorf("workflow: config: StoreData file directory: %w", err)
		}
		c.FileDir = dir
	}
	return c, nil
}

// checkLimits refuses a negative limit, naming its variable: passed on as
// it was, a negative API-call limit meant none (the spec's 30 a minute and
// 500 an hour gone), the others no bound or every step refused.
func (c Config) checkLimits() error {
	for _, l := range []struct {
		name string
		neg  bool
	}{
		{"E2A_WORKFLOW_MAX_OPERATIONS", c.MaxOperations < 0}, {"E2A_WORKFLOW_MAX_EXECUTION_TIME", c.MaxExecutionTime < 0},
		{"E2A_WORKFLOW_MAX_RESPONSE_BYTES", c.MaxResponseBytes < 0}, {"E2A_WORKFLOW_MAX_LOOP_ITERATIONS", c.MaxLoopIterations < 0},
		{"E2A_WORKFLOW_MAX_STEPS", c.MaxSteps < 0}, {"E2A_WORKFLOW_API_CALLS_PER_MINUTE", c.APICallsPerMinute < 0},
		{"E2A_WORKFLOW_API_CALLS_PER_HOUR", c.APICallsPerHour < 0}, {"E2A_WORKFLOW_MAX_RETRIES", c.MaxRetries < 0},
		{"E2A_WORKFLOW_LOCAL_QUOTA_BYTES (-1: none)", c.LocalQuotaBytes < -1},
		{"E2A_WORKFLOW_SESSION_QUOTA_BYTES (-1: none)", c.SessionQuotaBytes < -1},
	} {
		if l.neg {
			return fmt.Errorf("workflow: config: %s must not be negative", l.name)
		}
	}
	return nil
}

// LocalQuota is the localStorage quota per principal for a bucket bounded
// to bucketMaxBytes (<= 0: unbounded): LocalQuotaBytes, or when it is 0
// bucketMaxBytes / [DefaultLocalQuotaShare]; -1 when there is none.
func (c Config) LocalQuota(bucketMaxBytes int64) int64 {
	return quotaOf(c.LocalQuotaBytes, bucketMaxBytes)
}

// SessionQuota is the sessionStorage quota per principal for a bucket
// bounded to bucketMaxBytes, as [Config.LocalQuota] is of LocalQuotaBytes:
// SessionQuotaBytes, or when it is 0 bucketMaxBytes /
// [DefaultLocalQuotaShare]; -1 when there is none.
func (c Config) SessionQuota(bucketMaxBytes int64) int64 {
	return quotaOf(c.SessionQuotaBytes, bucketMaxBytes)
}

func quotaOf(set, bucketMaxBytes int64) int64 {
	switch {
	case set != 0:
		return set
	case bucketMaxBytes > 0:
		return max(bucketMaxBytes/DefaultLocalQuotaShare, 1)
	}
	return -1
}

// DefaultFileDir returns, created with mode 0700, the directory StoreData
// "file" writes to when E2A_WORKFLOW_FILE_DIR is unset: <user cache
// dir>/e2a/workflow-files (kept across restarts, private to the user), or,
// when that cannot be created, a new per-process directory under the
// system's temporary directory. Each principal writes under its own
// subdirectory, through os.Root.
func DefaultFileDir() (string, error) {
	if base, err := os.UserCacheDir(); err == nil {
		dir := filepath.Join(base, "e2a", "workflow-files")
		if err := os.MkdirAll(dir, 0o700); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp("", "e2a-workflow-files-")
}

// Options builds executor options: the policy (file, then allowed hosts
// and nets), the vault (file, then the E2A_WORKFLOW_CREDENTIAL_* entries
// of environ), limits, retries, the API-call limiter and the cache. The
// caller adds Storage (KV buckets, FileDir) and, for Cache "kv", the
// KVCache.
func (c Config) Options(environ []string, log *slog.Logger) (Options, error) {
	if err := c.checkLimits(); err != nil {
		return Options{}, err
	}
	pol := &Policy{}
	if c.PolicyFile != "" {
		p, err := LoadPolicy(c.PolicyFile)
		if err != nil {
			return Options{}, err
		}
		pol = p
	}
	if err := pol.AllowHosts(c.AllowedHosts...); err != nil {
		return Options{}, err
	}
	if err := pol.AllowNets(c.AllowedNets...); err != nil {
		return Options{}, err
	}
	v := NewVault()
	keys, err := c.Keyring()
	if err != nil {
		return Options{}, err
	}
	v.SetKeyring(keys)
	if c.CredentialsFile != "" {
		if err := v.LoadVaultFile(c.CredentialsFile); err != nil {
			return Options{}, err
		}
	}
	if environ == nil {
		environ = os.Environ()
	}
	if err := v.LoadEnv(environ); err != nil {
		return Options{}, err
	}
	if keys == nil && v.size() > 0 && log != nil {
		log.Warn("workflow: credentials are stored in plaintext; set " + EnvVaultKeys + " and seal them (e2a vault)")
	}
	retry := DefaultRetryPolicy()
	retry.MaxRetries = c.MaxRetries
	if c.MaxRetries == 0 {
		retry.MaxRetries = -1
	}
	o := Options{
		Policy: pol, Vault: v, Retry: retry, Logger: log,
		Limits: Limits{MaxOperations: c.MaxOperations, MaxExecutionTime: c.MaxExecutionTime, MaxResponseBytes: c.MaxResponseBytes,
			MaxLoopIterations: c.MaxLoopIterations, MaxSteps: c.MaxSteps},
		Limiter:         NewWindowLimiter(c.APICallsPerMinute, c.APICallsPerHour, nil),
		ContinueOnError: c.ContinueOnError,
	}
	switch c.Cache {
	case "off", "none":
		o.Cache = NoCache{}
	case "memory", "", "kv":
	default:
		return Options{}, fmt.Errorf("workflow: config: E2A_WORKFLOW_CACHE %q is not memory, kv or off", c.Cache)
	}
	if c.FileDir != "" {
		o.Storage = &Stores{Dir: c.FileDir}
	}
	return o, nil
}

package streams

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig describes a connection to an external NATS cluster. Its fields
// are read from the environment with envconfig, each tag naming its
// variable in full (envconfig.Process("", &cfg)): E2A_NATS_URL,
// E2A_NATS_CREDS, … (with a prefix, envconfig would read NATS_URL when
// E2A_NATS_URL is unset).
//
// Secrets (Password) never appear in String or in slog output.
type ConnConfig struct {
	// NatsURL is one or more server URLs, comma separated.
	NatsURL string `envconfig:"E2A_NATS_URL"`
	// CredsFile is a user JWT + NKey seed credentials file.
	CredsFile string `envconfig:"E2A_NATS_CREDS"`
	// User and Password authenticate with a user name and password.
	User     string `envconfig:"E2A_NATS_USER"`
	Password string `envconfig:"E2A_NATS_PASSWORD"`
	// NKeySeedFile is a file holding an NKey user seed.
	NKeySeedFile string `envconfig:"E2A_NATS_NKEY"`
	// TLSCA is a PEM file of root CAs to verify the servers with.
	TLSCA string `envconfig:"E2A_NATS_TLS_CA"`
	// TLSCert and TLSKey are the PEM client certificate and key, both or
	// neither.
	TLSCert string `envconfig:"E2A_NATS_TLS_CERT"`
	TLSKey  string `envconfig:"E2A_NATS_TLS_KEY"`
	// Name is the connection name shown by the servers; default "e2a".
	Name string `envconfig:"E2A_NATS_NAME"`
	// ReconnectWait is the pause between reconnect attempts; default 2s.
	// The connection reconnects forever.
	ReconnectWait time.Duration `envconfig:"E2A_NATS_RECONNECT_WAIT"`
	// PingInterval is how often the client pings its server; default 1s
	// (DefaultPingInterval). A server that leaves MaxPingsOut pings in a
	// row unanswered is given up for another one of the cluster: a
	// frozen server, or one behind a partition that drops packets, closes
	// no socket, so only the pings tell.
	PingInterval time.Duration `envconfig:"E2A_NATS_PING_INTERVAL"`
	// ReconnectBufSize is how many bytes of publishes are buffered while
	// reconnecting; default 8 MiB.
	ReconnectBufSize int `envconfig:"E2A_NATS_RECONNECT_BUFFER"`
	// InboxPrefix is the prefix of the connection's inboxes, the subjects
	// its replies come back on (JetStream API answers, PubAcks, direct
	// gets, pull deliveries). Default: "_INBOX.<User>" when User is a
	// valid subject token, else nats.go's "_INBOX". The deployment's
	// accounts.conf lets each user subscribe to its own prefix only, so no
	// stage can read the replies another one gets (see InboxPrefixFor).
	InboxPrefix string `envconfig:"E2A_NATS_INBOX_PREFIX"`
}

// InboxPrefixFor is the inbox prefix a connection as user gets by
// default, "_INBOX.<user>", or "" (nats.go's own "_INBOX.<random>") when
// user is empty or not a valid subject token (letters, digits, '-' and
// '_' only). deploy/nats/accounts.conf grants each stage user
// "subscribe _INBOX.<user>.>" and nothing else under _INBOX: a user
// allowed "_INBOX.>" received every other client's replies (the task
// records, push configurations and envelopes ingress and egress read).
func InboxPrefixFor(user string) string {
	if user == "" {
		return ""
	}
	for _, r := range user {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return ""
		}
	}
	return nats.InboxPrefix + user
}

// inboxPrefix is the prefix c's connection uses ("" = nats.go's default).
func (c ConnConfig) inboxPrefix() string {
	if c.InboxPrefix != "" {
		return c.InboxPrefix
	}
	return InboxPrefixFor(c.User)
}

// validInboxPrefix reports whether p is a subject of non-empty tokens
// without wildcards or white space.
func validInboxPrefix(p string) bool {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return false
		}
	}
	return true
}

// String describes c without its secrets.
func (c ConnConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "url=%s", RedactURLs(c.NatsURL))
	if c.CredsFile != "" {
		fmt.Fprintf(&b, " creds=%s", c.CredsFile)
	}
	if c.User != "" {
		fmt.Fprintf(&b, " user=%s password=%s", c.User, redact(c.Password))
	}
	if c.NKeySeedFile != "" {
		fmt.Fprintf(&b, " nkey=%s", c.NKeySeedFile)
	}
	if c.TLSCA != "" || c.TLSCert != "" {
		fmt.Fprintf(&b, " tls_ca=%s tls_cert=%s", c.TLSCA, c.TLSCert)
	}
	if c.Name != "" {
		fmt.Fprintf(&b, " name=%s", c.Name)
	}
	return b.String()
}

// LogValue describes c without its secrets for log/slog.
func (c ConnConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", RedactURLs(c.NatsURL)),
		slog.String("creds", c.CredsFile),
		slog.String("user", c.User),
		slog.String("password", redact(c.Password)),
		slog.String("nkey", c.NKeySeedFile),
		slog.String("tls_ca", c.TLSCA),
		slog.String("tls_cert", c.TLSCert),
		slog.String("name", c.Name),
	)
}

// RedactURLs returns the comma-separated NATS URLs of s with the password
// or token of any user information replaced ("nats://u:xxxxx@h:4222",
// "nats://xxxxx@h"): nats.go takes credentials in a URL, and a URL is
// printed and logged. A URL without a scheme is read as nats.go reads it
// (nats:// added); one that does not parse keeps nothing of what comes
// before its last "@".
func RedactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := parseNATSURL(p)
		if err != nil {
			if at := strings.LastIndex(p, "@"); at >= 0 {
				start := 0
				if j := strings.Index(p, "://"); j >= 0 && j < at {
					start = j + len("://")
				}
				parts[i] = p[:start] + "xxxxx" + p[at:]
			}
			continue
		}
		if u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); !ok {
			u.User = url.User("xxxxx") // a token alone
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}

// parseNATSURL parses one NATS server URL as nats.go does: trimmed, and
// nats:// added when it names no scheme.
func parseNATSURL(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	return url.Parse(s)
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// Validate returns ErrInvalidConnConfig when c has no URL or one that
// does not parse (named redacted: url.Parse's own error quotes it whole,
// credentials and all), mixes authentication methods, has a TLS
// certificate without its key (or the reverse), or an inbox prefix that
// is not a subject without wildcards.
func (c ConnConfig) Validate() error {
	if strings.TrimSpace(c.NatsURL) == "" {
		return fmt.Errorf("%w: no NATS URL", ErrInvalidConnConfig)
	}
	for _, p := range strings.Split(c.NatsURL, ",") {
		if _, err := parseNATSURL(p); err != nil {
			// url.Parse's error quotes the URL, credentials and all.
			return fmt.Errorf("%w: NATS URL %s does not parse (percent-encode a %% or / in a password)", ErrInvalidConnConfig, RedactURLs(p))
		}
	}
	methods := 0
	for _, set := range []bool{c.CredsFile != "", c.User != "" || c.Password != "", c.NKeySeedFile != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return fmt.Errorf("%w: use one of credentials file, user/password, nkey", ErrInvalidConnConfig)
	}
	if c.Password != "" && c.User == "" {
		return fmt.Errorf("%w: password without user", ErrInvalidConnConfig)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: TLS certificate and key go together", ErrInvalidConnConfig)
	}
	if c.ReconnectWait < 0 || c.ReconnectBufSize < 0 || c.PingInterval < 0 {
		return fmt.Errorf("%w: negative reconnect or ping setting", ErrInvalidConnConfig)
	}
	if c.InboxPrefix != "" && !validInboxPrefix(c.InboxPrefix) {
		return fmt.Errorf("%w: inbox prefix %q is not a subject without wildcards (E2A_NATS_INBOX_PREFIX, e.g. _INBOX.ingress)", ErrInvalidConnConfig, c.InboxPrefix)
	}
	return nil
}

// DefaultPingInterval and MaxPingsOut bound how long a connection stays on
// a server that stopped answering: it is given up at the (MaxPingsOut+1)th
// ping tick without a pong, 4–5 s after the server froze, and the client
// reconnects to another server of the cluster. nats.go's own defaults (a
// ping every 2 minutes, 2 outstanding) kept a stage on a frozen server for
// 6 minutes while the rest of the cluster served: every agent worker and
// serve replica on it stalled. A pong is allowed 2–3 s, so a loaded
// server or client is not mistaken for a frozen one.
const (
	DefaultPingInterval = time.Second
	MaxPingsOut         = 3
)

// Options returns the nats.Options for c: servers, authentication, TLS,
// name, inbox prefix, reconnecting forever with buffered publishes, and
// pings that give up a server that stopped answering (DefaultPingInterval).
//
// It returns ErrInvalidConnConfig when c is invalid.
func (c ConnConfig) Options() ([]nats.Option, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	name := c.Name
	if name == "" {
		name = "e2a"
	}
	wait := c.ReconnectWait
	if wait == 0 {
		wait = 2 * time.Second
	}
	buf := c.ReconnectBufSize
	if buf == 0 {
		buf = 8 << 20
	}
	ping := c.PingInterval
	if ping == 0 {
		ping = DefaultPingInterval
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.ReconnectBufSize(buf),
		nats.PingInterval(ping),
		nats.MaxPingsOutstanding(MaxPingsOut),
	}
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey seed file: %w", ErrInvalidConnConfig, err)
		}
		opts = append(opts, o)
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if p := c.inboxPrefix(); p != "" {
		opts = append(opts, nats.CustomInboxPrefix(p))
	}
	return opts, nil
}

// Connect connects to the servers of cfg, with extra options appended to
// cfg.Options. The first connection attempt is bounded by ctx's deadline
// (default 5s); once connected, the connection reconnects forever.
//
// It returns ErrInvalidConnConfig when cfg is invalid, ctx.Err() when ctx
// ends first, and the client's error when no server can be reached.
func Connect(ctx context.Context, cfg ConnConfig, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	opts = append(opts, nats.Timeout(timeout))
	opts = append(opts, extra...)

	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(cfg.NatsURL, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		return r.nc, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

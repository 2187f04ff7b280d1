package push

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a "github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/net/http/httpguts"

	"github.com/e2a-pipeline/pipeline/redact"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Versions of A2A a config was registered with; they decide the body and
// the token header of its deliveries.
const (
	// V1 configs get A2A v1.0 StreamResponse JSON and the token in both
	// A2A-Notification-Token and X-A2A-Notification-Token.
	V1 = "1.0"
	// V03 configs get the A2A v0.3 Task (kind task) as tasks/get answers
	// it after each update, as the v0.3 SDKs post it, and
	// X-A2A-Notification-Token.
	V03 = "0.3"
)

// Auth schemes a config may carry.
const (
	SchemeBearer = "Bearer"
	SchemeBasic  = "Basic"
)

// Limits of a config's fields.
const (
	maxIDLen    = 256
	maxTokenLen = 4096
	maxURLLen   = 2048
	maxCredLen  = 8192
	// maxSchemeLen bounds a scheme kept as given (one without
	// credentials that is neither Bearer nor Basic).
	maxSchemeLen = 64
	// taskBytesPerConfig bounds the bytes of a task's configs as stored
	// without a seal key: so many per config WithMaxPerTask admits, on
	// average (maxTaskBytes). The fields' own limits let one config take
	// 15 KB (and up to 30 KB of JSON, a '"' stored as \"): 1,000 tasks of
	// 10 such took several times E2A_PUSH's bytes, and once it was full
	// every principal's creates and cursors were refused.
	taskBytesPerConfig = 8 << 10
	// minTaskBytes is the least bound of a task's configs: one config
	// with every field at its limit fits.
	minTaskBytes = 40 << 10
)

// maxTaskBytes bounds the JSON of one task's configs, unsealed (ErrLimit
// beyond): taskBytesPerConfig times the configs a task may have, at
// least minTaskBytes. A principal's configs then take at most
// WithMaxTasksPerPrincipal times this (78 MiB by default; sealed values
// about 1.4 times their size more) of E2A_PUSH, whatever their fields.
func maxTaskBytes(maxPerTask int) int { return max(maxPerTask*taskBytesPerConfig, minTaskBytes) }

// Auth is a config's authentication: Authorization: <Scheme> <Credentials>
// on every delivery when it has credentials (Scheme is then Bearer or
// Basic; without credentials any scheme token is kept and nothing is
// sent). Credentials are stored in the bucket and sent to the webhook
// only: never logged, never in a dead-lettered update, never in the
// console.
type Auth struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// Config is one push notification config of a task, in either generation
// of A2A ([FromV1], [FromV03], [Config.V1], [Config.V03]).
type Config struct {
	// TaskID is the task whose updates are delivered.
	TaskID string `json:"task_id"`
	// ID names the config within its task; Store.Create assigns one when
	// it is empty.
	ID string `json:"id"`
	// URL is the webhook, checked by Store.Create.
	URL string `json:"url"`
	// Token is sent as the version's notification token header.
	Token string `json:"token,omitempty"`
	// Auth, when set, is sent as Authorization.
	Auth *Auth `json:"auth,omitempty"`
	// Version is V1 or V03 (default V1).
	Version string `json:"version"`
	// Created is set by Store.Create (informative).
	Created time.Time `json:"created"`
	// From is set by Store.Create: the last sequence of E2A_RESPONSES once
	// the config was stored. Updates stored at or before it are not
	// delivered to this config (a sequence, not a time: the stream's
	// server and the caller's clocks may disagree).
	From uint64 `json:"from"`
	// Stream is set by Store.Create with From: the creation time (Unix
	// nanoseconds) of the E2A_RESPONSES From numbers a message of. A
	// stream made again (removed and applied again, lost by a cluster)
	// numbers its messages from 1 again: From counts in its own stream
	// only, and every message of a stream made after it was stored after
	// the config (fromIn). 0: written before configs named their stream,
	// taken as the stream's.
	Stream int64 `json:"stream,omitempty"`
	// FromAt is set with From: the time the message at From was stored
	// (Unix nanoseconds; 0: none, or written before configs had it). A
	// message stored later at a sequence not after From says the stream
	// went back under the config (wentBack).
	FromAt int64 `json:"from_at,omitempty"`
}

// fromIn is c's From as a sequence of the E2A_RESPONSES e (its epoch 0:
// not known): 0, every message, in another stream than c's; in a stream
// restored from a backup of c's (streamEpoch.holds), From where the backup
// holds it, else the restore point: every restored message was stored
// before c. In e gone back under From (e.lost), the restore point too.
func (c Config) fromIn(e streamEpoch) uint64 {
	switch {
	case c.Stream == e.at && e.lost(c.From, c.FromAt):
		return e.rewound
	case c.Stream == 0 || e.at == 0 || c.Stream == e.at:
		return c.From
	case e.holds(c.Stream):
		return min(c.From, e.restored)
	}
	return 0
}

// FromV1 is the config of an A2A v1.0 TaskPushNotificationConfig.
func FromV1(c *a2a.PushConfig) Config {
	out := Config{TaskID: string(c.TaskID), ID: c.ID, URL: c.URL, Token: c.Token, Version: V1}
	if c.Auth != nil {
		out.Auth = &Auth{Scheme: c.Auth.Scheme, Credentials: c.Auth.Credentials}
	}
	return out
}

// V1 is c as an A2A v1.0 TaskPushNotificationConfig (tenant left empty).
func (c Config) V1() *a2a.PushConfig {
	out := &a2a.PushConfig{TaskID: a2a.TaskID(c.TaskID), ID: c.ID, URL: c.URL, Token: c.Token}
	if c.Auth != nil {
		out.Auth = &a2a.PushAuthInfo{Scheme: c.Auth.Scheme, Credentials: c.Auth.Credentials}
	}
	return out
}

// FromV03 is the config of an A2A v0.3 TaskPushNotificationConfig (its
// first Bearer or Basic scheme is kept, else its first scheme, which
// Create refuses only with credentials: v0.3's schemes list what the
// webhook accepts, credentials optional; an authentication without
// schemes or credentials says nothing and is dropped). A config without
// id is the task's own: its id is the task id, as the v0.3 reference servers
// (@a2a-js/sdk 0.3, a2a-python) store it and tasks/pushNotificationConfig/get
// without pushNotificationConfigId reads it; setting one again, inline
// with each message as v0.3 clients do, replaces it.
func FromV03(c *a2a03.TaskPushConfig) Config {
	out := Config{TaskID: string(c.TaskID), ID: cmp.Or(c.Config.ID, string(c.TaskID)), URL: c.Config.URL, Token: c.Config.Token, Version: V03}
	if a := c.Config.Auth; a != nil && (len(a.Schemes) > 0 || a.Credentials != "") {
		out.Auth = &Auth{Credentials: a.Credentials}
		for _, s := range a.Schemes {
			if sc, ok := canonicalScheme(s); ok {
				out.Auth.Scheme = sc
				break
			}
		}
		if out.Auth.Scheme == "" && len(a.Schemes) > 0 {
			out.Auth.Scheme = a.Schemes[0]
		}
	}
	return out
}

// V03 is c as an A2A v0.3 TaskPushNotificationConfig.
func (c Config) V03() *a2a03.TaskPushConfig {
	out := &a2a03.TaskPushConfig{TaskID: a2a03.TaskID(c.TaskID),
		Config: a2a03.PushConfig{ID: c.ID, URL: c.URL, Token: c.Token}}
	if c.Auth != nil {
		out.Config.Auth = &a2a03.PushAuthInfo{Schemes: []string{c.Auth.Scheme}, Credentials: c.Auth.Credentials}
	}
	return out
}

// String names the config without its URL's query, token or credentials.
func (c Config) String() string {
	return fmt.Sprintf("push config %q of task %q (%s)", c.ID, c.TaskID, redact.URL(c.URL))
}

func canonicalScheme(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bearer":
		return SchemeBearer, true
	case "basic":
		return SchemeBasic, true
	}
	return "", false
}

// check validates every field but the URL's host rules, normalizing the
// version and the scheme.
func (c *Config) check() error {
	switch {
	case c.TaskID == "":
		return fmt.Errorf("%w: no task id", ErrInvalidConfig)
	case len(c.TaskID) > subjects.MaxIDLength || !utf8.ValidString(c.TaskID):
		// Any task id the pipeline takes (an Idempotency-Key names a new
		// task's, up to subjects.MaxIDLength): a webhook for one longer
		// than 256 bytes was refused.
		return fmt.Errorf("%w: task id longer than %d bytes or not UTF-8", ErrInvalidConfig, subjects.MaxIDLength)
	case len(c.ID) > maxIDLen || !utf8.ValidString(c.ID):
		return fmt.Errorf("%w: id longer than %d bytes or not UTF-8", ErrInvalidConfig, maxIDLen)
	case c.ID == "." || c.ID == "..":
		// A dot segment in the HTTP+JSON binding's path
		// (…/pushNotificationConfigs/{id}): removed by clients and servers
		// (RFC 3986 §5.2.4), so no HTTP+JSON call could read or delete it.
		return fmt.Errorf("%w: id %q (a dot segment: the HTTP+JSON binding cannot name it in a path)", ErrInvalidConfig, c.ID)
	case len(c.Token) > maxTokenLen || !headerValue(c.Token):
		return fmt.Errorf("%w: token longer than %d bytes, not a header value, or starting or ending with whitespace", ErrInvalidConfig, maxTokenLen)
	case strings.HasPrefix(c.Token, sealPrefix):
		// Stored as given by a store without a seal key, it could not be
		// opened again: the task's configs would all be unreadable.
		return fmt.Errorf("%w: token starting as a sealed value (%s)", ErrInvalidConfig, sealPrefix)
	case c.URL == "":
		return fmt.Errorf("%w: no url", ErrInvalidConfig)
	case len(c.URL) > maxURLLen:
		return fmt.Errorf("%w: url longer than %d bytes", ErrURLRefused, maxURLLen)
	}
	switch c.Version {
	case "", V1:
		c.Version = V1
	case V03:
	default:
		return fmt.Errorf("%w: version %q (want %q or %q)", ErrInvalidConfig, c.Version, V1, V03)
	}
	if c.Auth == nil {
		return nil
	}
	sc, ok := canonicalScheme(c.Auth.Scheme)
	switch {
	case !ok && (c.Auth.Credentials != "" || len(c.Auth.Scheme) > maxSchemeLen || !httpguts.ValidHeaderFieldName(c.Auth.Scheme)):
		// Credentials are sent as Authorization: Bearer or Basic only. A
		// scheme without credentials has nothing to send (none is sent,
		// as for Bearer without credentials): it is kept as given, an
		// RFC 9110 auth-scheme token.
		return fmt.Errorf("%w: authentication scheme %q (want Bearer or Basic with credentials, or a scheme token without)", ErrInvalidConfig, c.Auth.Scheme)
	case !ok:
		sc = c.Auth.Scheme
	}
	if len(c.Auth.Credentials) > maxCredLen || !headerValue(c.Auth.Credentials) || strings.HasPrefix(c.Auth.Credentials, sealPrefix) {
		return fmt.Errorf("%w: credentials longer than %d bytes, not a header value, starting or ending with whitespace, or starting as a sealed value", ErrInvalidConfig, maxCredLen)
	}
	c.Auth = &Auth{Scheme: sc, Credentials: c.Auth.Credentials}
	return nil
}

// headerValue reports whether s can be sent in an HTTP header as it is:
// a valid field value without whitespace at either end (net/http trims
// it from what it sends, and the receiver would get another value than it
// registered).
func headerValue(s string) bool {
	return httpguts.ValidHeaderFieldValue(s) && strings.Trim(s, " \t") == s
}

// tok encodes an id as a subject token: never empty, only [A-Za-z0-9_-].
func tok(s string) string { return "t" + base64.RawURLEncoding.EncodeToString([]byte(s)) }

// taskKey is the bucket key of the configs of principal's task.
func taskKey(principal, taskID string) string { return "cfg." + tok(principal) + "." + tok(taskID) }

// principalKeys matches the config keys of every task of principal.
func principalKeys(principal string) string { return "cfg." + tok(principal) + ".*" }

// configRef names one config of one principal's task: its cursor key and
// its dead-letter subject.
type configRef struct{ principal, taskID, id string }

func (r configRef) tokens() string { return tok(r.principal) + "." + tok(r.taskID) + "." + tok(r.id) }

func (r configRef) cursorKey() string { return "cur." + r.tokens() }

func (r configRef) deadSubject() string { return "e2a.push.dead." + r.tokens() }

package workflow

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Secret is a credential value. It prints and encodes as "[redacted]" so
// that a stray log line or JSON encoding never shows it.
type Secret string

// String returns "[redacted]".
func (Secret) String() string { return "[redacted]" }

// GoString returns "[redacted]".
func (Secret) GoString() string { return "[redacted]" }

// MarshalJSON writes "[redacted]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// UnmarshalJSON reads the value (vault files).
func (s *Secret) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Secret(v)
	return nil
}

// Credential is one entry of the vault. Only ID and Description are ever
// shown to agents.
type Credential struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Value       Secret `json:"value"`
	// Principals allowed to use it; empty means everyone.
	Principals []string `json:"principals,omitempty"`
	// Hosts it may be sent to (host[:port] patterns); empty means any host
	// the principal may call. Binding a credential to its API's hosts keeps
	// an agent from sending it to another allowed host.
	Hosts []string `json:"hosts,omitempty"`

	hosts []hostPattern
}

// CredentialInfo is what capabilities list about a credential.
type CredentialInfo struct {
	ID          string   `json:"id"`
	Description string   `json:"description,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
}

// Vault holds credentials, resolved only inside the worker when an
// ApiCall header names one with credentialRef. The zero value is empty; a
// nil *Vault has no credentials.
type Vault struct {
	mu    sync.RWMutex
	creds map[string]*Credential
	keys  *Keyring
}

// SetKeyring sets the vault keys: values loaded afterwards from a file or
// the environment must then be sealed ([SealedPrefix]; plaintext ones are
// ErrPlaintextCredential), and are opened when loaded. Credentials are
// stored encrypted at rest (spec §7, Credential Handling); the opened value
// lives only in the worker's memory. Without keys the vault reads plaintext
// (development) and refuses sealed values.
func (v *Vault) SetKeyring(k *Keyring) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keys = k
}

func (v *Vault) size() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.creds)
}

func (v *Vault) keyring() *Keyring {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.keys
}

// NewVault returns an empty vault.
func NewVault() *Vault { return &Vault{creds: map[string]*Credential{}} }

// Add stores a credential (replacing one with the same id). A sealed
// value is opened with the vault's keys.
func (v *Vault) Add(c Credential) error {
	if c.ID == "" {
		return fmt.Errorf("workflow: vault: credential without id")
	}
	if IsSealed(string(c.Value)) {
		pt, err := v.keyring().Open(c.ID, string(c.Value))
		if err != nil {
			return err
		}
		c.Value = Secret(pt)
	}
	c.hosts = nil
	for _, h := range c.Hosts {
		hp, err := parseHostPattern(h)
		if err != nil {
			return fmt.Errorf("workflow: vault: credential %q: %w", c.ID, err)
		}
		c.hosts = append(c.hosts, hp)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.creds == nil {
		v.creds = map[string]*Credential{}
	}
	v.creds[c.ID] = &c
	return nil
}

// LoadVaultFile adds the credentials of a JSON file: either
// {"credentials": [Credential, …]} or an object mapping ids to Credential
// (whose id may then be omitted) or to a bare string value.
func (v *Vault) LoadVaultFile(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("workflow: vault: %w", err)
	}
	var list struct {
		Credentials []Credential `json:"credentials"`
	}
	keys := v.keyring()
	if err := json.Unmarshal(b, &list); err == nil && list.Credentials != nil {
		for _, c := range list.Credentials {
			if _, err := keys.unseal(c.ID, string(c.Value)); err != nil {
				return err
			}
			if err := v.Add(c); err != nil {
				return err
			}
		}
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("workflow: vault %s: not a credentials file", file) // never echo the content
	}
	for id, raw := range m {
		var c Credential
		var s string
		if json.Unmarshal(raw, &s) == nil {
			c = Credential{ID: id, Value: Secret(s)}
		} else if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("workflow: vault %s: credential %q is not an object or a string", file, id)
		}
		if c.ID == "" {
			c.ID = id
		}
		if _, err := keys.unseal(c.ID, string(c.Value)); err != nil {
			return err
		}
		if err := v.Add(c); err != nil {
			return err
		}
	}
	return nil
}

// Env variable prefixes of [Vault.LoadEnv].
const (
	EnvCredentialPrefix     = "E2A_WORKFLOW_CREDENTIAL_"
	EnvCredentialHostPrefix = "E2A_WORKFLOW_CREDHOSTS_"
)

// LoadEnv adds credentials from environment entries ("KEY=value"; sealed
// values when the vault has keys, see [Vault.SetKeyring]):
// E2A_WORKFLOW_CREDENTIAL_<NAME>=<value> defines the credential whose id is
// NAME lower-cased with "_" turned into "-" (API_KEY_123 → api-key-123), and
// E2A_WORKFLOW_CREDHOSTS_<NAME>=<host patterns, comma-separated> binds it
// to hosts. Env credentials are available to every principal.
func (v *Vault) LoadEnv(environ []string) error {
	hosts := map[string][]string{}
	vals := map[string]string{}
	for _, kv := range environ {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, EnvCredentialPrefix) && len(k) > len(EnvCredentialPrefix):
			vals[k[len(EnvCredentialPrefix):]] = val
		case strings.HasPrefix(k, EnvCredentialHostPrefix):
			for _, h := range strings.Split(val, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hosts[k[len(EnvCredentialHostPrefix):]] = append(hosts[k[len(EnvCredentialHostPrefix):]], h)
				}
			}
		}
	}
	for name, val := range vals {
		id := strings.ReplaceAll(strings.ToLower(name), "_", "-")
		if _, err := v.keyring().unseal(id, val); err != nil {
			return err
		}
		if err := v.Add(Credential{ID: id, Value: Secret(val), Hosts: hosts[name], Description: "from the environment"}); err != nil {
			return err
		}
	}
	return nil
}

func (v *Vault) get(id string) (*Credential, bool) {
	if v == nil {
		return nil, false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	c, ok := v.creds[id]
	return c, ok
}

// check decides whether principal may send credential id to u.
func (v *Vault) check(principal, id string, u *url.URL) *Error {
	c, ok := v.get(id)
	if !ok || !principalIn(c.Principals, principal) {
		// the same answer whether it exists or not
		return permissionError("credential %q is not available to this agent", id)
	}
	if u != nil && strings.EqualFold(u.Scheme, "http") && !loopbackHost(u) {
		return permissionError("credential %q is sent over https only, not to http://%s", id, u.Host)
	}
	if len(c.hosts) > 0 && u != nil {
		host, port := normHost(u)
		for _, hp := range c.hosts {
			if hp.match(host, port) {
				return nil
			}
		}
		return permissionError("credential %q may not be sent to %s", id, u.Host)
	}
	return nil
}

// loopbackHost reports whether u names a loopback host: an IP literal in
// 127.0.0.0/8 or ::1 (IPv4-mapped too), or "localhost". A credential goes
// over plain http only to such a host (a local API in development), where
// it never crosses a network; elsewhere an http url would send it in clear
// to anyone on the path, whatever host binding it has.
func loopbackHost(u *url.URL) bool {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// resolve returns the credential's value for a request to u.
func (v *Vault) resolve(principal, id string, u *url.URL) (string, *Error) {
	if err := v.check(principal, id, u); err != nil {
		return "", err
	}
	c, _ := v.get(id)
	return string(c.Value), nil
}

// List returns the credentials a principal may use, without values.
func (v *Vault) List(principal string) []CredentialInfo {
	out := []CredentialInfo{}
	if v == nil {
		return out
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, c := range v.creds {
		if principalIn(c.Principals, principal) {
			out = append(out, CredentialInfo{ID: c.ID, Description: c.Description, Hosts: c.Hosts})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// redactor removes secret values that were used in an execution from any
// text the execution produces (response bodies a server echoed them in,
// error messages).
type redactor struct {
	mu      sync.Mutex
	secrets []string
	// escaped match the secrets as other JSON encoders write them inside
	// a string (escapedPattern): PHP's "\/", .NET's "\u002B", Gson's
	// "\u003d"; an echo in an error body is kept as text.
	escaped []*regexp.Regexp
}

const redacted = "[redacted]"

func (r *redactor) add(s string) {
	if len(s) < 3 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.secrets {
		if x == s {
			return
		}
	}
	r.secrets = append(r.secrets, s)
	r.escaped = append(r.escaped, escapedPattern(s))
	if q, err := json.Marshal(s); err == nil && string(q[1:len(q)-1]) != s {
		r.secrets = append(r.secrets, string(q[1:len(q)-1]))
	}
	if e := url.QueryEscape(s); e != s {
		r.secrets = append(r.secrets, e)
	}
	// the value without a scheme word, e.g. the token of "Bearer <token>"
	if _, tok, ok := strings.Cut(s, " "); ok && len(tok) >= 8 {
		r.secrets = append(r.secrets, tok)
	}
}

func (r *redactor) text(s string) string {
	if r == nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.secrets {
		if strings.Contains(s, x) {
			s = strings.ReplaceAll(s, x, redacted)
		}
	}
	if strings.IndexByte(s, '\\') >= 0 { // an escaped form needs a backslash
		for _, re := range r.escaped {
			s = re.ReplaceAllLiteralString(s, redacted)
		}
	}
	return s
}

// escapedPattern matches s as a JSON encoder may write it inside a string:
// each character as it is or as a \u escape (either hex case), '/' also as
// "\/", '"' and '\' as "\"" and "\\". Encoders differ in what they escape
// (PHP every '/', .NET '+' and HTML characters, Gson '=' and HTML ones), and
// an API echoing a credential in its error body writes it its way
// (found by review: a key with '/' echoed by PHP reached the error).
func escapedPattern(s string) *regexp.Regexp {
	var b strings.Builder
	for _, c := range s {
		b.WriteString("(?:")
		b.WriteString(regexp.QuoteMeta(string(c)))
		if c < 0x10000 {
			fmt.Fprintf(&b, `|\\u(?i:%04x)`, c)
		}
		switch c {
		case '/':
			b.WriteString(`|\\/`)
		case '"':
			b.WriteString(`|\\"`)
		case '\\':
			b.WriteString(`|\\\\`)
		}
		b.WriteString(")")
	}
	return regexp.MustCompile(b.String())
}

func (r *redactor) bytes(b []byte) []byte {
	if r == nil || len(r.secrets) == 0 {
		return b
	}
	return []byte(r.text(string(b)))
}

// value redacts every string inside a JSON value.
func (r *redactor) value(v any) any {
	if r == nil || len(r.secrets) == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		return r.text(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[r.text(k)] = r.value(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = r.value(x)
		}
		return out
	}
	return v
}

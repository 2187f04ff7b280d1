package ingress

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// AuthConfig is the auth configuration, read from a JSON file (E2A_AUTH_FILE)
// and/or environment variables by LoadAuth. The file format:
//
//	{
//	  "schemes": ["apiKey", "bearer", "oauth2"],   // or ["none"]; see below
//	  "realm": "e2a",                              // WWW-Authenticate realm
//	  "anonymous_principal": "anonymous",          // UserID under "none"
//	  "api_keys": [
//	    {"principal": "alice", "secret": "<random, >= 16 bytes>"},
//	    {"principal": "bob", "secret_sha256": "<64 hex digits>", "identity_origin": "agent"},
//	    {"principal": "mallory", "secret_sha256": "...", "disabled": true}
//	  ],
//	  "bearer_tokens": [
//	    {"principal": "ci", "secret": "<random>"}
//	  ],
//	  "oauth2": {
//	    "signing_key": "<>= 32 bytes, or base64:...>",   // same on every replica
//	    "verify_keys": ["<previous signing key>"],       // accepted during rotation
//	    "issuer": "e2a-pipeline",
//	    "audience": "",                                  // checked when set
//	    "token_ttl": "1h",
//	    "token_url": "https://agents.example.com/oauth/token",
//	    "required_scope": "",                            // tokens must carry it when set
//	    "clients": [
//	      {"client_id": "svc-a", "client_secret_sha256": "<64 hex>",
//	       "principal": "svc-a", "identity_origin": "service", "scopes": ["agents"]}
//	    ]
//	  }
//	}
//
// (Comments are for this description only; the file is plain JSON.)
//
// When "schemes" is empty, every scheme with credentials is enabled, and
// "none" when there are no credentials at all. Listing a scheme without
// credentials is an error. "none" may be combined with others: then requests
// without credentials are anonymous, requests with credentials are checked.
//
// Secrets may be given in clear ("secret", "client_secret") or, better, as
// the hex SHA-256 of the secret ("secret_sha256", "client_secret_sha256",
// e.g. `printf %s "$KEY" | sha256sum`). NewAuth keeps digests only and clears
// the clear-text fields of the config it is given. identity_origin is one of
// system, user, agent, service (default user; service for oauth2 clients).
// A principal may have several keys (rotation); a secret may not appear
// twice.
type AuthConfig struct {
	Schemes            []string     `json:"schemes,omitempty"`
	Realm              string       `json:"realm,omitempty"`
	AnonymousPrincipal string       `json:"anonymous_principal,omitempty"`
	APIKeys            []Credential `json:"api_keys,omitempty"`
	BearerTokens       []Credential `json:"bearer_tokens,omitempty"`
	OAuth2             OAuth2Config `json:"oauth2"`
	// Roles gives principals access beyond their own data: "audit" reads
	// every principal's requests, tasks, sessions and executions; "admin"
	// may also continue and cancel them. Keys are principal names.
	Roles map[string][]string `json:"roles,omitempty"`
}

// Credential is one API key or static bearer token.
type Credential struct {
	Principal      string `json:"principal"`
	IdentityOrigin string `json:"identity_origin,omitempty"`
	Secret         string `json:"secret,omitempty"`
	SecretSHA256   string `json:"secret_sha256,omitempty"`
	Disabled       bool   `json:"disabled,omitempty"`
}

// OAuth2Config configures the client credentials grant and token checks.
type OAuth2Config struct {
	SigningKey    string         `json:"signing_key,omitempty"`
	VerifyKeys    []string       `json:"verify_keys,omitempty"`
	Issuer        string         `json:"issuer,omitempty"`
	Audience      string         `json:"audience,omitempty"`
	TokenTTL      string         `json:"token_ttl,omitempty"`
	TokenURL      string         `json:"token_url,omitempty"`
	RequiredScope string         `json:"required_scope,omitempty"`
	Clients       []OAuth2Client `json:"clients,omitempty"`
}

// OAuth2Client is one client of the client credentials grant. Principal
// defaults to ClientID.
type OAuth2Client struct {
	ClientID           string   `json:"client_id"`
	ClientSecret       string   `json:"client_secret,omitempty"`
	ClientSecretSHA256 string   `json:"client_secret_sha256,omitempty"`
	Principal          string   `json:"principal,omitempty"`
	IdentityOrigin     string   `json:"identity_origin,omitempty"`
	Scopes             []string `json:"scopes,omitempty"`
	Disabled           bool     `json:"disabled,omitempty"`
}

// Defaults of the oauth2 configuration.
const (
	DefaultTokenIssuer = "e2a-pipeline"
	DefaultTokenTTL    = time.Hour
	DefaultTokenPath   = "/oauth/token"
	DefaultAuthRealm   = "e2a"
	// MinSigningKeyLength is the shortest HMAC signing key accepted.
	MinSigningKeyLength = 32
)

// Environment variables read by LoadAuth. Lists are comma separated; an
// entry is "<principal>:<secret>" (client entries "<client_id>:<secret>"),
// split at the first colon, each half trimmed of spaces (an empty one is an
// error naming the entry's position), and the secret may be "sha256:<64 hex>" to give
// its digest instead (a secret starting "sha256:" is always read as a
// digest, and refused unless it is 64 hex digits). Lists add to the file's; the other variables override
// the file's values.
const (
	EnvAuthFile          = "E2A_AUTH_FILE"
	EnvAuthSchemes       = "E2A_AUTH_SCHEMES"
	EnvAuthRealm         = "E2A_AUTH_REALM"
	EnvAPIKeys           = "E2A_API_KEYS"
	EnvBearerTokens      = "E2A_BEARER_TOKENS"
	EnvOAuth2Clients     = "E2A_OAUTH2_CLIENTS"
	EnvOAuth2SigningKey  = "E2A_OAUTH2_SIGNING_KEY"
	EnvOAuth2VerifyKeys  = "E2A_OAUTH2_VERIFY_KEYS"
	EnvOAuth2Issuer      = "E2A_OAUTH2_ISSUER"
	EnvOAuth2Audience    = "E2A_OAUTH2_AUDIENCE"
	EnvOAuth2TokenTTL    = "E2A_OAUTH2_TOKEN_TTL"
	EnvOAuth2TokenURL    = "E2A_OAUTH2_TOKEN_URL"
	EnvOAuth2RequiredScp = "E2A_OAUTH2_REQUIRED_SCOPE"
	// EnvAuthRoles lists "<principal>:<role>" entries (role audit or admin),
	// added to the file's roles.
	EnvAuthRoles = "E2A_AUTH_ROLES"
)

// LoadAuth reads the configuration from the file named by E2A_AUTH_FILE (if
// set) and the environment variables above, through getenv (os.Getenv in
// production), and returns the Auth. No clear-text secret outlives the call.
func LoadAuth(getenv func(string) string, opts ...AuthOption) (*Auth, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var cfg AuthConfig
	if path := getenv(EnvAuthFile); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrAuthConfig, EnvAuthFile, err)
		}
		if err := decodeAuthConfig(data, &cfg); err != nil {
			clear(data)
			return nil, err
		}
		clear(data)
	}
	if err := applyAuthEnv(getenv, &cfg); err != nil {
		cfg.wipe()
		return nil, err
	}
	a, err := NewAuth(&cfg, opts...)
	cfg.wipe()
	return a, err
}

// ParseAuthConfig decodes a configuration file. Unknown fields are errors.
func ParseAuthConfig(data []byte) (AuthConfig, error) {
	var cfg AuthConfig
	err := decodeAuthConfig(data, &cfg)
	return cfg, err
}

func decodeAuthConfig(data []byte, cfg *AuthConfig) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		// Syntax errors carry offsets, never content.
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("%w: file: JSON syntax error at offset %d", ErrAuthConfig, se.Offset)
		case errors.As(err, &te):
			return fmt.Errorf("%w: file: field %q has the wrong type", ErrAuthConfig, te.Field)
		}
		return fmt.Errorf("%w: file: %v", ErrAuthConfig, err)
	}
	return nil
}

func applyAuthEnv(getenv func(string) string, cfg *AuthConfig) error {
	if v := getenv(EnvAuthSchemes); v != "" {
		cfg.Schemes = splitList(v)
	}
	if v := getenv(EnvAuthRealm); v != "" {
		cfg.Realm = v
	}
	for _, l := range []struct {
		env  string
		dest *[]Credential
	}{{EnvAPIKeys, &cfg.APIKeys}, {EnvBearerTokens, &cfg.BearerTokens}} {
		for i, e := range splitList(getenv(l.env)) {
			name, clear, sum, err := envSecretEntry(l.env, i, e, "<principal>:<secret>")
			if err != nil {
				return err
			}
			*l.dest = append(*l.dest, Credential{Principal: name, Secret: clear, SecretSHA256: sum})
		}
	}
	for i, e := range splitList(getenv(EnvOAuth2Clients)) {
		id, clear, sum, err := envSecretEntry(EnvOAuth2Clients, i, e, "<client_id>:<secret>")
		if err != nil {
			return err
		}
		cfg.OAuth2.Clients = append(cfg.OAuth2.Clients, OAuth2Client{ClientID: id, ClientSecret: clear, ClientSecretSHA256: sum})
	}
	o := &cfg.OAuth2
	for env, dst := range map[string]*string{
		EnvOAuth2SigningKey: &o.SigningKey, EnvOAuth2Issuer: &o.Issuer, EnvOAuth2Audience: &o.Audience,
		EnvOAuth2TokenTTL: &o.TokenTTL, EnvOAuth2TokenURL: &o.TokenURL, EnvOAuth2RequiredScp: &o.RequiredScope,
	} {
		if v := getenv(env); v != "" {
			*dst = v
		}
	}
	if v := getenv(EnvOAuth2VerifyKeys); v != "" {
		o.VerifyKeys = append(o.VerifyKeys, splitList(v)...)
	}
	for i, e := range splitList(getenv(EnvAuthRoles)) {
		name, role, err := envEntry(EnvAuthRoles, i, e, "<principal>:<role>")
		if err != nil {
			return err
		}
		if cfg.Roles == nil {
			cfg.Roles = map[string][]string{}
		}
		cfg.Roles[name] = append(cfg.Roles[name], role)
	}
	return nil
}

// envEntry splits entry i of the list variable env, e, at its first
// colon, each half trimmed ("alice : key" is alice's "key"); an entry
// without a colon, or with a half empty once trimmed, is an error naming
// the entry by its position (1-based) and its form want, never its text
// (it may hold a secret).
func envEntry(env string, i int, e, want string) (name, value string, err error) {
	name, value, ok := strings.Cut(e, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || value == "" {
		return "", "", fmt.Errorf("%w: %s entry %d must be %s", ErrAuthConfig, env, i+1, want)
	}
	return name, value, nil
}

// envSecretEntry is envEntry for an entry whose value is a secret: in clear,
// or its digest after "sha256:" (trimmed too). Anything after "sha256:" is
// a digest, checked as one: a mistyped digest taken as a clear key would
// make its text (not secret) a working credential.
func envSecretEntry(env string, i int, e, want string) (name, clear, sum string, err error) {
	name, secret, err := envEntry(env, i, e, want)
	if err != nil {
		return "", "", "", err
	}
	h, ok := strings.CutPrefix(secret, "sha256:")
	if !ok {
		if len(secret) < MinSecretLength {
			return "", "", "", fmt.Errorf("%w: %s entry %d: the secret is shorter than %d bytes (secrets must be random, ≥ 128 bits)",
				ErrAuthConfig, env, i+1, MinSecretLength)
		}
		return name, secret, "", nil
	}
	if h = strings.TrimSpace(h); h == "" {
		return "", "", "", fmt.Errorf("%w: %s entry %d must be %s: its sha256 is empty", ErrAuthConfig, env, i+1, want)
	}
	return name, "", h, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// wipe drops every clear-text secret of c (the strings themselves are
// immutable; this removes the references so nothing keeps them alive).
func (c *AuthConfig) wipe() {
	for i := range c.APIKeys {
		c.APIKeys[i].Secret = ""
	}
	for i := range c.BearerTokens {
		c.BearerTokens[i].Secret = ""
	}
	for i := range c.OAuth2.Clients {
		c.OAuth2.Clients[i].ClientSecret = ""
	}
	c.OAuth2.SigningKey = ""
	c.OAuth2.VerifyKeys = nil
}

// NewAuth validates cfg and returns the Auth. It keeps only digests of the
// API keys, bearer tokens and client secrets, and clears the clear-text
// secret fields of *cfg (the signing keys included) before returning.
func NewAuth(cfg *AuthConfig, opts ...AuthOption) (*Auth, error) {
	defer cfg.wipe()
	a := &Auth{realm: cfg.Realm, now: time.Now, apiKeys: credSet{}, bearers: credSet{}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrAuthConfig)
		}
		o(a)
	}
	if a.realm == "" {
		a.realm = DefaultAuthRealm
	}
	if strings.ContainsAny(a.realm, "\"\\\r\n") {
		return nil, fmt.Errorf("%w: realm must not contain quotes, backslashes or newlines", ErrAuthConfig)
	}
	anon := cfg.AnonymousPrincipal
	if anon == "" {
		anon = DefaultAnonymousPrincipal
	}
	if !validPrincipalName(anon) {
		return nil, fmt.Errorf("%w: invalid anonymous_principal", ErrAuthConfig)
	}
	a.anonymous = Principal{UserID: anon, IdentityOrigin: e2a.IdentityUser, Scheme: SchemeNone}

	enabled, err := enabledSchemes(cfg)
	if err != nil {
		return nil, err
	}
	for _, s := range []string{SchemeNone, SchemeAPIKey, SchemeBearer, SchemeOAuth2} {
		if enabled[s] {
			a.schemes = append(a.schemes, s)
		}
	}
	if err := loadCredentials(cfg.APIKeys, a.apiKeys, SchemeAPIKey, "api_keys", enabled[SchemeAPIKey]); err != nil {
		return nil, err
	}
	if err := loadCredentials(cfg.BearerTokens, a.bearers, SchemeBearer, "bearer_tokens", enabled[SchemeBearer]); err != nil {
		return nil, err
	}
	if enabled[SchemeOAuth2] {
		iss, err := newOAuthIssuer(&cfg.OAuth2)
		if err != nil {
			return nil, err
		}
		a.oauth = iss
	}
	if len(a.schemes) == 1 && a.schemes[0] == SchemeNone && (len(cfg.APIKeys) > 0 || len(cfg.BearerTokens) > 0 || len(cfg.OAuth2.Clients) > 0) {
		return nil, fmt.Errorf("%w: credentials are configured but only scheme none is enabled", ErrAuthConfig)
	}
	a.anonymous.Open = a.Open()
	if err := a.loadRoles(cfg); err != nil {
		return nil, err
	}
	if !slices.Contains(a.schemes, SchemeAPIKey) {
		a.apiKeys = credSet{}
	}
	if !slices.Contains(a.schemes, SchemeBearer) {
		a.bearers = credSet{}
	}
	if err := sharedSecrets(a.apiKeys, a.bearers); err != nil {
		return nil, err
	}
	if a.limitCfg != nil {
		// With authentication off every credential is refused without a
		// comparison: nothing to guess, nothing to limit.
		if err := a.limitCfg.Validate(); err != nil {
			return nil, err
		}
		if !a.Open() {
			if a.limiter, err = newFailLimiter(*a.limitCfg, a.limitReg); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// sharedSecrets refuses a secret that is one principal's API key and
// another's bearer token: whoever holds it would be either principal,
// by the header it is sent in. (The same principal's secret in both
// lists names one principal and is allowed.)
func sharedSecrets(keys, bearers credSet) error {
	for k, bs := range bearers {
		for _, b := range bs {
			for _, c := range keys[k] {
				if c.sum == b.sum && c.principal.UserID != b.principal.UserID {
					return fmt.Errorf("%w: the same secret is API key of %q and bearer token of %q", ErrAuthConfig, c.principal.UserID, b.principal.UserID)
				}
			}
		}
	}
	return nil
}

// enabledSchemes are the schemes cfg enables: those it names, else those
// it has credentials for, else none.
func enabledSchemes(cfg *AuthConfig) (map[string]bool, error) {
	enabled := map[string]bool{}
	for _, s := range cfg.Schemes {
		c, ok := canonicalScheme(s)
		if !ok {
			return nil, fmt.Errorf("%w: unknown scheme %q (want none, apiKey, bearer, oauth2)", ErrAuthConfig, s)
		}
		enabled[c] = true
	}
	if len(enabled) == 0 {
		enabled[SchemeAPIKey] = len(cfg.APIKeys) > 0
		enabled[SchemeBearer] = len(cfg.BearerTokens) > 0
		enabled[SchemeOAuth2] = len(cfg.OAuth2.Clients) > 0
		enabled[SchemeNone] = !enabled[SchemeAPIKey] && !enabled[SchemeBearer] && !enabled[SchemeOAuth2]
	}
	return enabled, nil
}

// loadCredentials checks the credentials list of scheme (configured as
// what; some are required when the scheme is enabled) and adds their
// digests to set.
func loadCredentials(list []Credential, set credSet, scheme, what string, enabled bool) error {
	if enabled && len(list) == 0 {
		return fmt.Errorf("%w: scheme %s is enabled but no %s are configured", ErrAuthConfig, scheme, what)
	}
	for i, c := range list {
		label := fmt.Sprintf("%s[%d]", what, i)
		if !validPrincipalName(c.Principal) {
			return fmt.Errorf("%w: %s: invalid principal (1..256 bytes, no control characters, ':' or ',')", ErrAuthConfig, label)
		}
		origin := c.IdentityOrigin
		if origin == "" {
			origin = e2a.IdentityUser
		}
		if !validIdentityOrigin(origin) {
			return fmt.Errorf("%w: %s: identity_origin %q must be system, user, agent or service", ErrAuthConfig, label, origin)
		}
		sum, err := loadDigest(c.Secret, c.SecretSHA256, label)
		if err != nil {
			return err
		}
		if err := set.add(&credential{sum: sum, disabled: c.Disabled,
			principal: Principal{UserID: c.Principal, IdentityOrigin: origin, Scheme: scheme}}); err != nil {
			return err
		}
	}
	return nil
}

// loadRoles checks the roles of cfg and that no configured principal can be
// impersonated by an anonymous caller.
func (a *Auth) loadRoles(cfg *AuthConfig) error {
	anon := a.anonymous.UserID
	if slices.Contains(a.schemes, SchemeNone) {
		names := map[string]bool{}
		for _, c := range cfg.APIKeys {
			names[c.Principal] = true
		}
		for _, c := range cfg.BearerTokens {
			names[c.Principal] = true
		}
		for _, c := range cfg.OAuth2.Clients {
			if c.Principal != "" {
				names[c.Principal] = true
			} else {
				names[c.ClientID] = true
			}
		}
		if names[anon] {
			return fmt.Errorf("%w: principal %q is also the anonymous principal: anonymous callers would own its data", ErrAuthConfig, anon)
		}
	}
	for name, roles := range cfg.Roles {
		if name == anon && slices.Contains(a.schemes, SchemeNone) {
			return fmt.Errorf("%w: roles: the anonymous principal %q cannot have a role", ErrAuthConfig, anon)
		}
		if !validPrincipalName(name) {
			return fmt.Errorf("%w: roles: invalid principal %q", ErrAuthConfig, name)
		}
		for _, r := range roles {
			role, err := tenant.ParseRole(r)
			if err != nil {
				return fmt.Errorf("%w: roles of %q: %v", ErrAuthConfig, name, err)
			}
			if a.roles == nil {
				a.roles = map[string][]tenant.Role{}
			}
			if !slices.Contains(a.roles[name], role) {
				a.roles[name] = append(a.roles[name], role)
			}
		}
	}
	return nil
}

package ingress

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/ctxkey"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Authentication of the front door: schemes none, apiKey (X-Api-Key header),
// bearer (static tokens) and oauth2 (client credentials; tokens issued by
// TokenHandler, HMAC-SHA256 signed JWTs). See AUTH.md for the configuration
// file and environment variables.
//
// Secrets (API keys, bearer tokens, client secrets) are kept only as SHA-256
// digests once loaded and compared with crypto/subtle. No error, log hook or
// Principal ever carries a presented credential. The HMAC signing key is the
// one secret kept as is, since signing needs it.

// Auth scheme names, as used in the configuration, Principal.Scheme and the
// agent card.
const (
	SchemeNone   = "none"
	SchemeAPIKey = "apiKey"
	SchemeBearer = "bearer"
	SchemeOAuth2 = "oauth2"
)

// HeaderAPIKey carries the key of the apiKey scheme.
const HeaderAPIKey = "X-Api-Key"

// DefaultAnonymousPrincipal is the UserID given to requests without
// credentials when the none scheme is enabled.
const DefaultAnonymousPrincipal = "anonymous"

var (
	// ErrUnauthenticated means no acceptable credential was presented:
	// answer 401 with WWW-Authenticate (see Auth.SetChallenge).
	ErrUnauthenticated = errors.New("ingress: unauthenticated")
	// ErrForbidden means the credential is valid but may not be used here
	// (disabled principal, missing scope): answer 403.
	ErrForbidden = errors.New("ingress: forbidden")
	// ErrAuthConfig reports an invalid auth configuration.
	ErrAuthConfig = errors.New("ingress: invalid auth config")
)

// Principal is who a request is from. It goes into the envelope (UserID,
// IdentityOrigin); the credential never does.
type Principal struct {
	UserID         string
	IdentityOrigin string
	Scheme         string
	// Roles are the roles the auth configuration gives UserID ("roles").
	Roles []tenant.Role
	// Open is true when authentication is off (the none scheme alone):
	// nobody is kept apart, and the request's own user_id is kept.
	Open bool
}

// Tenant returns the principal as the ownership rule (package tenant) sees
// it.
func (p Principal) Tenant() tenant.Principal {
	return tenant.Principal{ID: p.UserID, Roles: p.Roles, Open: p.Open}
}

// Authenticator authenticates an HTTP request. Errors wrap
// ErrUnauthenticated or ErrForbidden and never contain the credential.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// AuthError is the error of Authenticate. Scheme is the scheme of the
// presented credential ("" when none was), Reason a short description that
// is safe to log and to send to the client.
type AuthError struct {
	Scheme string
	Reason string
	// OAuthError is the RFC 6750 error code for the challenge:
	// "invalid_token", "insufficient_scope", "invalid_request" or "".
	OAuthError string
	// RetryAfter is how long a throttled client waits (ErrAuthThrottled);
	// 0 otherwise.
	RetryAfter time.Duration
	err        error
}

func (e *AuthError) Error() string {
	s := e.err.Error()
	if e.Scheme != "" {
		s += " (" + e.Scheme + ")"
	}
	return s + ": " + e.Reason
}

// ClientMessage is what the client reads of the refusal (its status, the
// scheme and the reason): Error without the package's prefix, which the
// logs keep (egress.ClientMessage, design.md Guarantees 7).
func (e *AuthError) ClientMessage() string { return strings.TrimPrefix(e.Error(), "ingress: ") }

// Unwrap returns ErrUnauthenticated, ErrForbidden or ErrAuthThrottled.
func (e *AuthError) Unwrap() error { return e.err }

func unauthenticated(scheme, oauthErr, reason string) *AuthError {
	return &AuthError{Scheme: scheme, Reason: reason, OAuthError: oauthErr, err: ErrUnauthenticated}
}

func forbidden(scheme, oauthErr, reason string) *AuthError {
	return &AuthError{Scheme: scheme, Reason: reason, OAuthError: oauthErr, err: ErrForbidden}
}

// AuthStatus returns the HTTP status for an error of Authenticate: 401, 403,
// 429 for a client over the failure limit (ErrAuthThrottled), or 500 for
// anything else.
func AuthStatus(err error) int {
	switch {
	case errors.Is(err, ErrAuthThrottled):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	default:
		return http.StatusInternalServerError
	}
}

// StripCredentialHeaders removes every header that may carry a credential
// (Authorization, Proxy-Authorization, X-Api-Key, Cookie), so that nothing
// after authentication can copy one into an envelope or a log.
func StripCredentialHeaders(h http.Header) {
	for _, k := range []string{"Authorization", "Proxy-Authorization", HeaderAPIKey, "Cookie"} {
		h.Del(k)
	}
}

var principalKey = ctxkey.New[Principal]("ingress principal")

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return principalKey.With(ctx, p)
}

// PrincipalFrom returns the principal stored by WithPrincipal.
func PrincipalFrom(ctx context.Context) (Principal, bool) { return principalKey.From(ctx) }

// digest is the SHA-256 of a secret.
type digest [sha256.Size]byte

func hashSecret(s string) digest { return sha256.Sum256([]byte(s)) }

// credential is a loaded API key or static bearer token.
type credential struct {
	sum       digest
	principal Principal
	disabled  bool
}

// credSet finds a credential by the digest of a presented secret. Digests
// are bucketed by their first 8 bytes (which reveal nothing usable about the
// secret), and every candidate of a bucket is compared in full with
// crypto/subtle, without early exit.
type credSet map[uint64][]*credential

func (s credSet) add(c *credential) error {
	k := binary.BigEndian.Uint64(c.sum[:8])
	for _, o := range s[k] {
		if o.sum == c.sum {
			return fmt.Errorf("%w: the same secret is configured twice (principals %q and %q)", ErrAuthConfig, o.principal.UserID, c.principal.UserID)
		}
	}
	s[k] = append(s[k], c)
	return nil
}

func (s credSet) find(secret string) *credential {
	sum := hashSecret(secret)
	var found *credential
	for _, c := range s[binary.BigEndian.Uint64(sum[:8])] {
		if subtle.ConstantTimeCompare(c.sum[:], sum[:]) == 1 {
			found = c
		}
	}
	return found
}

// Auth authenticates requests with the configured schemes and issues OAuth2
// tokens. Create it with NewAuth or LoadAuth. It is safe for concurrent use;
// its configuration is immutable after creation, and its one mutable state,
// the failure limiter's counts (WithAuthLimit), has its own lock.
type Auth struct {
	schemes   []string // in canonical order
	realm     string
	anonymous Principal
	apiKeys   credSet
	bearers   credSet
	oauth     *oauthIssuer
	now       func() time.Time
	onFailure func(scheme, reason string)
	// roles maps principals to their roles.
	roles map[string][]tenant.Role
	// limitCfg and limitReg configure limiter, the failure limiter (nil:
	// off; authlimit.go).
	limitCfg *AuthLimitConfig
	limitReg prometheus.Registerer
	limiter  *failLimiter
}

// AuthOption configures an Auth.
type AuthOption func(*Auth)

// WithAuthClock sets the clock used for token issue and expiry (tests).
func WithAuthClock(now func() time.Time) AuthOption { return func(a *Auth) { a.now = now } }

// WithAuthFailureHook calls f on every failed authentication or token
// request with the scheme ("" when no credential was presented) and a safe
// reason; wire it to a metric (e2a_ingress_auth_failures_total) or a log.
func WithAuthFailureHook(f func(scheme, reason string)) AuthOption {
	return func(a *Auth) { a.onFailure = f }
}

// String never reveals any key material.
func (a *Auth) String() string {
	return fmt.Sprintf("ingress.Auth{schemes: %v, api keys: %d, bearer tokens: %d, oauth2 clients: %d}",
		a.schemes, a.apiKeys.len(), a.bearers.len(), a.oauth.clientCount())
}

// GoString never reveals any key material.
func (a *Auth) GoString() string { return a.String() }

func (s credSet) len() int {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	return n
}

// Schemes returns the enabled schemes.
func (a *Auth) Schemes() []string { return slices.Clone(a.schemes) }

// Enabled reports whether scheme is enabled.
func (a *Auth) Enabled(scheme string) bool { return slices.Contains(a.schemes, scheme) }

// Realm returns the realm of the WWW-Authenticate challenges.
func (a *Auth) Realm() string { return a.realm }

func (a *Auth) fail(e *AuthError) (Principal, error) {
	if a.onFailure != nil {
		a.onFailure(e.Scheme, e.Reason)
	}
	return Principal{}, e
}

// Authenticate returns the principal of r. A request may present one
// credential: X-Api-Key, or Authorization: Bearer (a static bearer token or
// an oauth2 access token). A request with none is anonymous if the none
// scheme is enabled. A presented credential is always checked, even when
// none is enabled: a wrong key is an error, never anonymous.
//
// With the failure limiter on (WithAuthLimit), a credential from a client
// address (ClientAddress of r.RemoteAddr) with too many refused ones is
// refused unchecked, ErrAuthThrottled.
func (a *Auth) Authenticate(r *http.Request) (Principal, error) {
	return a.AuthenticateFrom(r.Header, r.RemoteAddr)
}

// AuthenticateHeader is Authenticate for the credentials of a transport's
// headers (HTTP headers, gRPC metadata as an http.Header) whose peer is not
// known: the failure limiter does not apply (use AuthenticateFrom).
func (a *Auth) AuthenticateHeader(h http.Header) (Principal, error) {
	return a.AuthenticateFrom(h, "")
}

// AuthenticateFrom is AuthenticateHeader for a peer at remoteAddr ("ip:port"
// as net/http and gRPC give it; "" when unknown), under the failure limiter.
func (a *Auth) AuthenticateFrom(h http.Header, remoteAddr string) (Principal, error) {
	return a.limited(h, remoteAddr, func() (Principal, error) {
		p, err := a.authenticate(h)
		if err == nil && p.Scheme != SchemeNone {
			p.Roles = a.roles[p.UserID]
		}
		return p, err
	})
}

// AuthenticateAPIKeyBearer is Authenticate that also accepts an API key
// sent as "Authorization: Bearer <api-key>", the form of the A2E workflow
// specification (Security, Authentication), when the apiKey scheme is
// enabled and the token is not a static bearer token. Only the workflow
// REST API uses it; every other endpoint keeps Authenticate (ingress/AUTH.md).
func (a *Auth) AuthenticateAPIKeyBearer(r *http.Request) (Principal, error) {
	return a.limited(r.Header, r.RemoteAddr, func() (Principal, error) {
		authz := r.Header.Values("Authorization")
		if a.Enabled(SchemeAPIKey) && len(authz) == 1 && len(r.Header.Values(HeaderAPIKey)) == 0 {
			scheme, token, ok := strings.Cut(strings.TrimSpace(authz[0]), " ")
			token = strings.TrimSpace(token)
			if ok && strings.EqualFold(scheme, "Bearer") && token != "" && a.apiKeys.find(token) != nil &&
				(!a.Enabled(SchemeBearer) || a.bearers.find(token) == nil) {
				p, err := a.authAPIKey(token)
				if err == nil {
					p.Roles = a.roles[p.UserID]
				}
				return p, err
			}
		}
		return a.AuthenticateHeader(r.Header)
	})
}

// Anonymous returns the principal of a request that presents no
// credential: the anonymous principal when the none scheme is enabled,
// else an unauthenticated error (transports without credentials, such as
// ACP over stdio, use it).
func (a *Auth) Anonymous() (Principal, error) {
	if a.Enabled(SchemeNone) {
		return a.anonymous, nil
	}
	return a.fail(unauthenticated("", "", "missing credentials"))
}

// Open reports whether authentication is off (the none scheme alone).
func (a *Auth) Open() bool { return len(a.schemes) == 1 && a.schemes[0] == SchemeNone }

// Tenant authenticates r like Authenticate and returns the principal as the
// ownership rule sees it (what egress and the console check readers with).
func (a *Auth) Tenant(r *http.Request) (tenant.Principal, error) {
	p, err := a.Authenticate(r)
	return p.Tenant(), err
}

func (a *Auth) authenticate(h http.Header) (Principal, error) {
	keys := h.Values(HeaderAPIKey)
	authz := h.Values("Authorization")
	switch {
	case len(keys) == 0 && len(authz) == 0:
		return a.Anonymous()
	case len(keys)+len(authz) > 1:
		return a.fail(unauthenticated("", "invalid_request", "more than one credential presented"))
	case len(keys) == 1:
		return a.authAPIKey(keys[0])
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(authz[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return a.fail(unauthenticated("", "invalid_request", "unsupported Authorization scheme; use Bearer"))
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return a.fail(unauthenticated(SchemeBearer, "invalid_request", "empty bearer token"))
	}
	bearer, oauth := a.Enabled(SchemeBearer), a.Enabled(SchemeOAuth2)
	if !bearer && !oauth {
		return a.fail(unauthenticated(SchemeBearer, "invalid_request", "bearer tokens are not accepted"))
	}
	if bearer {
		if c := a.bearers.find(token); c != nil {
			if c.disabled {
				return a.fail(forbidden(SchemeBearer, "", "principal disabled"))
			}
			return c.principal, nil
		}
	}
	if oauth && strings.Count(token, ".") == 2 {
		p, err := a.oauth.verify(token, a.now())
		if err != nil {
			return a.fail(err)
		}
		return p, nil
	}
	return a.fail(unauthenticated(SchemeBearer, "invalid_token", "invalid bearer token"))
}

func (a *Auth) authAPIKey(key string) (Principal, error) {
	if !a.Enabled(SchemeAPIKey) {
		return a.fail(unauthenticated(SchemeAPIKey, "", "API keys are not accepted"))
	}
	c := a.apiKeys.find(key)
	if c == nil {
		return a.fail(unauthenticated(SchemeAPIKey, "", "invalid API key"))
	}
	if c.disabled {
		return a.fail(forbidden(SchemeAPIKey, "", "principal disabled"))
	}
	return c.principal, nil
}

// Challenges returns the WWW-Authenticate values for an error of
// Authenticate (err may be nil for a plain challenge): a Bearer challenge
// (RFC 6750, with error="invalid_token" or "insufficient_scope" when that is
// the cause) when bearer or oauth2 is enabled, and an ApiKey challenge naming
// the header when apiKey is enabled.
func (a *Auth) Challenges(err error) []string {
	var ae *AuthError
	errors.As(err, &ae)
	var out []string
	if a.Enabled(SchemeBearer) || a.Enabled(SchemeOAuth2) {
		c := `Bearer realm="` + a.realm + `"`
		if ae != nil && ae.OAuthError != "" && (ae.Scheme == SchemeBearer || ae.Scheme == SchemeOAuth2) {
			c += `, error="` + ae.OAuthError + `", error_description="` + strings.ReplaceAll(ae.Reason, `"`, "'") + `"`
			if ae.OAuthError == "insufficient_scope" && a.oauth != nil && a.oauth.requiredScope != "" {
				c += `, scope="` + a.oauth.requiredScope + `"`
			}
		}
		out = append(out, c)
	}
	if a.Enabled(SchemeAPIKey) {
		out = append(out, `ApiKey realm="`+a.realm+`", header="`+HeaderAPIKey+`"`)
	}
	return out
}

// SetChallenge adds the WWW-Authenticate challenges for err to h. For a
// client over the failure limit (ErrAuthThrottled) it sets Retry-After
// instead: a challenge would invite the next guess.
func (a *Auth) SetChallenge(h http.Header, err error) {
	if _, ok := ThrottledRefusal(h, err); ok {
		return
	}
	for _, c := range a.Challenges(err) {
		h.Add("WWW-Authenticate", c)
	}
}

// SecurityScheme is an OpenAPI 3 security scheme object as A2A agent cards
// carry it.
type SecurityScheme struct {
	Type         string      `json:"type"`
	Description  string      `json:"description,omitempty"`
	In           string      `json:"in,omitempty"`
	Name         string      `json:"name,omitempty"`
	Scheme       string      `json:"scheme,omitempty"`
	BearerFormat string      `json:"bearerFormat,omitempty"`
	Flows        *OAuthFlows `json:"flows,omitempty"`
}

// OAuthFlows is the flows object of an oauth2 security scheme.
type OAuthFlows struct {
	ClientCredentials *OAuthFlow `json:"clientCredentials,omitempty"`
}

// OAuthFlow is one OAuth2 flow of a security scheme.
type OAuthFlow struct {
	TokenURL string            `json:"tokenUrl"`
	Scopes   map[string]string `json:"scopes"`
}

// SecurityDeclaration is what an A2A agent card declares about auth:
// marshal its fields as the card's "securitySchemes" and "security".
// Security is a list of alternatives; an empty requirement {} means that
// anonymous access is allowed too.
type SecurityDeclaration struct {
	SecuritySchemes map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	Security        []map[string][]string     `json:"security,omitempty"`
}

// SecuritySchemes returns the card declaration of the enabled schemes, with
// the configured token URL (default the relative "/oauth/token"; use
// SecuritySchemesFor to resolve it against the public base URL).
func (a *Auth) SecuritySchemes() SecurityDeclaration { return a.SecuritySchemesFor("") }

// SecuritySchemesFor is SecuritySchemes with a relative token URL resolved
// against baseURL (e.g. "https://agents.example.com").
func (a *Auth) SecuritySchemesFor(baseURL string) SecurityDeclaration {
	var d SecurityDeclaration
	add := func(name string, s SecurityScheme, scopes []string) {
		if d.SecuritySchemes == nil {
			d.SecuritySchemes = map[string]SecurityScheme{}
		}
		d.SecuritySchemes[name] = s
		if scopes == nil {
			scopes = []string{}
		}
		d.Security = append(d.Security, map[string][]string{name: scopes})
	}
	for _, s := range a.schemes {
		switch s {
		case SchemeAPIKey:
			add(s, SecurityScheme{Type: "apiKey", In: "header", Name: HeaderAPIKey, Description: "API key in the X-Api-Key header"}, nil)
		case SchemeBearer:
			add(s, SecurityScheme{Type: "http", Scheme: "bearer", Description: "Static bearer token"}, nil)
		case SchemeOAuth2:
			var req []string
			if a.oauth.requiredScope != "" {
				req = []string{a.oauth.requiredScope}
			}
			add(s, SecurityScheme{Type: "oauth2", Description: "OAuth 2.0 client credentials; send the access token as a bearer token",
				Flows: &OAuthFlows{ClientCredentials: &OAuthFlow{TokenURL: a.oauth.tokenURLFor(baseURL), Scopes: a.oauth.scopeCatalog()}}}, req)
		}
	}
	if a.Enabled(SchemeNone) && len(d.Security) > 0 {
		d.Security = append(d.Security, map[string][]string{})
	}
	return d
}

// AgentVaultAuthScheme is one entry of the AgentVault card's authSchemes.
type AgentVaultAuthScheme struct {
	Scheme      string   `json:"scheme"`
	Description string   `json:"description,omitempty"`
	TokenURL    string   `json:"tokenUrl,omitempty"`
	Scopes      []string `json:"scopes,omitempty"`
}

// AgentVaultAuthSchemes returns the AgentVault profile's authSchemes for the
// enabled schemes, the token URL resolved against baseURL.
func (a *Auth) AgentVaultAuthSchemes(baseURL string) []AgentVaultAuthScheme {
	out := make([]AgentVaultAuthScheme, 0, len(a.schemes))
	for _, s := range a.schemes {
		e := AgentVaultAuthScheme{Scheme: s}
		switch s {
		case SchemeNone:
			e.Description = "No authentication"
		case SchemeAPIKey:
			e.Description = "API key in the X-Api-Key header"
		case SchemeBearer:
			e.Description = "Authorization: Bearer <token>"
		case SchemeOAuth2:
			e.Description = "OAuth 2.0 client credentials grant"
			e.TokenURL = a.oauth.tokenURLFor(baseURL)
			for sc := range a.oauth.scopeCatalog() {
				e.Scopes = append(e.Scopes, sc)
			}
			slices.Sort(e.Scopes)
		}
		out = append(out, e)
	}
	return out
}

// canonicalScheme maps a configured scheme name (any case) to its constant.
func canonicalScheme(s string) (string, bool) {
	for _, c := range []string{SchemeNone, SchemeAPIKey, SchemeBearer, SchemeOAuth2} {
		if strings.EqualFold(strings.TrimSpace(s), c) {
			return c, true
		}
	}
	return "", false
}

func validIdentityOrigin(o string) bool {
	switch o {
	case e2a.IdentitySystem, e2a.IdentityUser, e2a.IdentityAgent, e2a.IdentityService:
		return true
	}
	return false
}

// validPrincipalName accepts 1..256 bytes of UTF-8 without control
// characters or ':' and ',' (the separators of the environment lists).
func validPrincipalName(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == ':' || r == ',' {
			return false
		}
	}
	return true
}

// MinSecretLength is the shortest API key, bearer token or client secret
// accepted in clear text; secrets must be random (≥ 128 bits of entropy).
const MinSecretLength = 16

// loadDigest returns the digest of a configured secret: the SHA-256 of
// clear (at least MinSecretLength bytes) or the hex digest given.
func loadDigest(clear, sumHex, what string) (digest, error) {
	var d digest
	switch {
	case clear != "" && sumHex != "":
		return d, fmt.Errorf("%w: %s has both a secret and its sha256; give one", ErrAuthConfig, what)
	case clear != "":
		if len(clear) < MinSecretLength {
			return d, fmt.Errorf("%w: %s is shorter than %d bytes", ErrAuthConfig, what, MinSecretLength)
		}
		return hashSecret(clear), nil
	case sumHex != "":
		b, err := hex.DecodeString(strings.TrimSpace(sumHex))
		if err != nil || len(b) != sha256.Size {
			return d, fmt.Errorf("%w: %s sha256 must be 64 hex digits", ErrAuthConfig, what)
		}
		copy(d[:], b)
		return d, nil
	default:
		return d, fmt.Errorf("%w: %s has no secret", ErrAuthConfig, what)
	}
}

package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// OAuth2 client credentials (RFC 6749 §4.4). Access tokens are compact JWTs
// (RFC 7519) signed with HMAC-SHA256 under a key shared by every replica:
//
//	header  {"alg":"HS256","typ":"JWT","kid":"<16 hex>"}
//	claims  {"iss","sub","aud"?,"iat","nbf","exp","jti","client_id","scope"?}
//
// Verification accepts only alg HS256 and a known kid (the signing key or a
// verify_keys entry, for rotation), compares the MAC in constant time, then
// checks iss, aud (when configured), nbf/exp (with a 30 s leeway for clock
// skew between replicas) and that the client still exists and is enabled
// (removing a client from the configuration revokes its tokens).

const (
	tokenLeeway     = 30 * time.Second
	maxTokenLength  = 4096
	maxTokenReqBody = 16 << 10
)

type oauthClient struct {
	id        string
	sum       digest
	principal Principal
	scopes    []string
	disabled  bool
}

type oauthIssuer struct {
	signKey       []byte
	signKID       string
	verifyKeys    map[string][]byte // kid → key
	issuer        string
	audience      string
	ttl           time.Duration
	tokenURL      string
	requiredScope string
	clients       map[string]*oauthClient
	dummy         digest // compared against for unknown client ids
}

func (o *oauthIssuer) clientCount() int {
	if o == nil {
		return 0
	}
	return len(o.clients)
}

func keyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("e2a-kid:"), key...))
	return hex.EncodeToString(sum[:8])
}

func parseSigningKey(s string) ([]byte, error) {
	var key []byte
	if b, ok := strings.CutPrefix(s, "base64:"); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b); err != nil {
			if key, err = base64.RawURLEncoding.DecodeString(b); err != nil {
				return nil, fmt.Errorf("%w: oauth2 signing key: invalid base64", ErrAuthConfig)
			}
		}
	} else {
		key = []byte(s)
	}
	if len(key) < MinSigningKeyLength {
		return nil, fmt.Errorf("%w: oauth2 signing key must be at least %d bytes", ErrAuthConfig, MinSigningKeyLength)
	}
	return key, nil
}

func newOAuthIssuer(c *OAuth2Config) (*oauthIssuer, error) {
	if c.SigningKey == "" {
		return nil, fmt.Errorf("%w: scheme oauth2 needs a signing key (%s), the same on every replica", ErrAuthConfig, EnvOAuth2SigningKey)
	}
	if len(c.Clients) == 0 {
		return nil, fmt.Errorf("%w: scheme oauth2 is enabled but no clients are configured", ErrAuthConfig)
	}
	key, err := parseSigningKey(c.SigningKey)
	if err != nil {
		return nil, err
	}
	o := &oauthIssuer{signKey: key, signKID: keyID(key), verifyKeys: map[string][]byte{}, issuer: c.Issuer,
		audience: c.Audience, tokenURL: c.TokenURL, requiredScope: c.RequiredScope, clients: map[string]*oauthClient{}}
	o.verifyKeys[o.signKID] = key
	for _, vk := range c.VerifyKeys {
		k, err := parseSigningKey(vk)
		if err != nil {
			return nil, err
		}
		o.verifyKeys[keyID(k)] = k
	}
	if o.issuer == "" {
		o.issuer = DefaultTokenIssuer
	}
	if o.tokenURL == "" {
		o.tokenURL = DefaultTokenPath
	}
	o.ttl = DefaultTokenTTL
	if c.TokenTTL != "" {
		if o.ttl, err = time.ParseDuration(c.TokenTTL); err != nil || o.ttl < time.Minute || o.ttl > 24*time.Hour {
			return nil, fmt.Errorf("%w: oauth2 token_ttl %q must be a duration between 1m and 24h", ErrAuthConfig, c.TokenTTL)
		}
	}
	if strings.ContainsAny(o.requiredScope, " \"\\") {
		return nil, fmt.Errorf("%w: oauth2 required_scope must be one scope token", ErrAuthConfig)
	}
	for i, cl := range c.Clients {
		label := fmt.Sprintf("oauth2.clients[%d]", i)
		if !validPrincipalName(cl.ClientID) {
			return nil, fmt.Errorf("%w: %s: invalid client_id", ErrAuthConfig, label)
		}
		if _, dup := o.clients[cl.ClientID]; dup {
			return nil, fmt.Errorf("%w: %s: client_id %q configured twice", ErrAuthConfig, label, cl.ClientID)
		}
		name := cl.Principal
		if name == "" {
			name = cl.ClientID
		}
		if !validPrincipalName(name) {
			return nil, fmt.Errorf("%w: %s: invalid principal", ErrAuthConfig, label)
		}
		origin := cl.IdentityOrigin
		if origin == "" {
			origin = e2a.IdentityService
		}
		if !validIdentityOrigin(origin) {
			return nil, fmt.Errorf("%w: %s: identity_origin %q must be system, user, agent or service", ErrAuthConfig, label, origin)
		}
		for _, s := range cl.Scopes {
			if s == "" || strings.ContainsAny(s, " \"\\") {
				return nil, fmt.Errorf("%w: %s: invalid scope", ErrAuthConfig, label)
			}
		}
		sum, err := loadDigest(cl.ClientSecret, cl.ClientSecretSHA256, label)
		if err != nil {
			return nil, err
		}
		// A client that can never obtain the required scope would get
		// tokens every door refuses (forbidden): the configuration is
		// refused instead, naming it (E2A_OAUTH2_CLIENTS gives no scopes).
		if o.requiredScope != "" && !cl.Disabled && !slices.Contains(cl.Scopes, o.requiredScope) {
			return nil, fmt.Errorf("%w: %s (%s) cannot obtain the required scope %q (%s): list it in the client's scopes (the auth file; %s gives none)",
				ErrAuthConfig, label, cl.ClientID, o.requiredScope, EnvOAuth2RequiredScp, EnvOAuth2Clients)
		}
		o.clients[cl.ClientID] = &oauthClient{id: cl.ClientID, sum: sum, scopes: slices.Clone(cl.Scopes), disabled: cl.Disabled,
			principal: Principal{UserID: name, IdentityOrigin: origin, Scheme: SchemeOAuth2}}
	}
	o.dummy = hashSecret(uuid.NewString())
	return o, nil
}

func (o *oauthIssuer) tokenURLFor(baseURL string) string {
	if baseURL == "" || !strings.HasPrefix(o.tokenURL, "/") {
		return o.tokenURL
	}
	return strings.TrimSuffix(baseURL, "/") + o.tokenURL
}

// scopeCatalog is every scope some client may obtain.
func (o *oauthIssuer) scopeCatalog() map[string]string {
	m := map[string]string{}
	for _, c := range o.clients {
		for _, s := range c.scopes {
			m[s] = ""
		}
	}
	if o.requiredScope != "" {
		m[o.requiredScope] = "required to call the agent"
	}
	return m
}

type tokenHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ,omitempty"`
	Kid string `json:"kid,omitempty"`
}

type tokenClaims struct {
	Iss      string          `json:"iss"`
	Sub      string          `json:"sub"`
	Aud      json.RawMessage `json:"aud,omitempty"`
	Iat      int64           `json:"iat"`
	Nbf      int64           `json:"nbf"`
	Exp      int64           `json:"exp"`
	Jti      string          `json:"jti"`
	ClientID string          `json:"client_id"`
	Scope    string          `json:"scope,omitempty"`
}

var b64url = base64.RawURLEncoding.Strict()

func (o *oauthIssuer) sign(c tokenClaims) (string, error) {
	h, err := json.Marshal(tokenHeader{Alg: "HS256", Typ: "JWT", Kid: o.signKID})
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	s := b64url.EncodeToString(h) + "." + b64url.EncodeToString(p)
	mac := hmac.New(sha256.New, o.signKey)
	mac.Write([]byte(s))
	return s + "." + b64url.EncodeToString(mac.Sum(nil)), nil
}

func (o *oauthIssuer) verify(token string, now time.Time) (Principal, *AuthError) {
	bad := func(reason string) (Principal, *AuthError) {
		return Principal{}, unauthenticated(SchemeOAuth2, "invalid_token", reason)
	}
	if len(token) > maxTokenLength {
		return bad("token too long")
	}
	hb, rest, _ := strings.Cut(token, ".")
	pb, sb, _ := strings.Cut(rest, ".")
	hj, err1 := b64url.DecodeString(hb)
	sig, err2 := b64url.DecodeString(sb)
	if err1 != nil || err2 != nil {
		return bad("malformed token")
	}
	var h tokenHeader
	if json.Unmarshal(hj, &h) != nil || h.Alg != "HS256" || (h.Typ != "" && h.Typ != "JWT") {
		return bad("unsupported token")
	}
	key, ok := o.verifyKeys[h.Kid]
	if !ok {
		return bad("unknown signing key")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(token[:len(hb)+1+len(pb)]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return bad("bad token signature")
	}
	pj, err := b64url.DecodeString(pb)
	if err != nil {
		return bad("malformed token")
	}
	var c tokenClaims
	if json.Unmarshal(pj, &c) != nil {
		return bad("malformed token claims")
	}
	if c.Iss != o.issuer {
		return bad("wrong token issuer")
	}
	if o.audience != "" && !audienceHas(c.Aud, o.audience) {
		return bad("wrong token audience")
	}
	t := now.Unix()
	if c.Exp == 0 || t >= c.Exp+int64(tokenLeeway/time.Second) {
		return bad("token expired")
	}
	if c.Nbf > t+int64(tokenLeeway/time.Second) {
		return bad("token not yet valid")
	}
	cl, ok := o.clients[c.ClientID]
	if !ok {
		return bad("token client unknown")
	}
	if cl.disabled {
		return Principal{}, forbidden(SchemeOAuth2, "invalid_token", "client disabled")
	}
	if o.requiredScope != "" && !slices.Contains(strings.Fields(c.Scope), o.requiredScope) {
		return Principal{}, forbidden(SchemeOAuth2, "insufficient_scope", "token lacks scope "+o.requiredScope)
	}
	return cl.principal, nil
}

func audienceHas(raw json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return slices.Contains(many, want)
	}
	return false
}

// TokenResponse is the successful answer of the token endpoint.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope,omitempty"`
}

// OAuthError is an error answer of the token endpoint (RFC 6749 §5.2).
type OAuthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *OAuthError) Error() string { return "oauth2: " + e.Code + ": " + e.Description }

func oauthErr(status int, code, desc string) *OAuthError {
	return &OAuthError{Status: status, Code: code, Description: desc}
}

// IssueToken runs the client credentials grant for a client: it checks the
// secret (in constant time) and the requested scopes (space separated; empty
// grants all of the client's scopes) and returns a signed access token.
func (a *Auth) IssueToken(clientID, clientSecret, scope string) (TokenResponse, error) {
	if a.oauth == nil {
		return TokenResponse{}, oauthErr(http.StatusBadRequest, "unsupported_grant_type", "the oauth2 scheme is not enabled")
	}
	o := a.oauth
	cl := o.clients[clientID]
	want := o.dummy
	if cl != nil {
		want = cl.sum
	}
	got := hashSecret(clientSecret)
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 || cl == nil {
		return TokenResponse{}, oauthErr(http.StatusUnauthorized, "invalid_client", "client authentication failed")
	}
	if cl.disabled {
		return TokenResponse{}, oauthErr(http.StatusBadRequest, "unauthorized_client", "the client is disabled")
	}
	granted := cl.scopes
	if req := strings.Fields(scope); len(req) > 0 {
		for _, s := range req {
			if !slices.Contains(cl.scopes, s) {
				return TokenResponse{}, oauthErr(http.StatusBadRequest, "invalid_scope", "scope "+strconv.Quote(s)+" is not allowed for this client")
			}
		}
		granted = req
	}
	now := a.now()
	c := tokenClaims{Iss: o.issuer, Sub: cl.principal.UserID, Iat: now.Unix(), Nbf: now.Unix(),
		Exp: now.Add(o.ttl).Unix(), Jti: uuid.NewString(), ClientID: cl.id, Scope: strings.Join(granted, " ")}
	if o.audience != "" {
		c.Aud, _ = json.Marshal(o.audience)
	}
	tok, err := o.sign(c)
	if err != nil {
		return TokenResponse{}, oauthErr(http.StatusInternalServerError, "server_error", "could not sign the token")
	}
	return TokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(o.ttl / time.Second), Scope: c.Scope}, nil
}

// TokenHandler is the OAuth2 token endpoint, to be mounted as
// POST /oauth/token. It accepts grant_type=client_credentials with the
// client authenticated by HTTP Basic (RFC 6749 §2.3.1) or by client_id and
// client_secret body parameters (not both), in an
// application/x-www-form-urlencoded or application/json body, and an
// optional scope. Answers carry Cache-Control: no-store; errors are RFC 6749
// §5.2 JSON objects.
func (a *Auth) TokenHandler() http.Handler {
	return http.HandlerFunc(a.serveToken)
}

func (a *Auth) serveToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		a.writeOAuthError(w, oauthErr(http.StatusMethodNotAllowed, "invalid_request", "use POST"))
		return
	}
	params, oe := readTokenParams(w, r)
	if oe != nil {
		a.writeOAuthError(w, oe)
		return
	}
	id, secret := params.Get("client_id"), params.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		if secret != "" || (id != "" && id != unescapeBasic(u)) {
			a.writeOAuthError(w, oauthErr(http.StatusBadRequest, "invalid_request", "use one client authentication method"))
			return
		}
		id, secret = unescapeBasic(u), unescapeBasic(p)
	}
	switch gt := params.Get("grant_type"); {
	case gt == "":
		a.writeOAuthError(w, oauthErr(http.StatusBadRequest, "invalid_request", "missing grant_type"))
		return
	case gt != "client_credentials":
		a.writeOAuthError(w, oauthErr(http.StatusBadRequest, "unsupported_grant_type", "only client_credentials is supported"))
		return
	}
	if id == "" || secret == "" {
		a.writeOAuthError(w, oauthErr(http.StatusUnauthorized, "invalid_client", "client authentication is required"))
		return
	}
	resp, err := a.limitedIssue(w.Header(), r.Header, r.RemoteAddr, func() (TokenResponse, error) {
		return a.IssueToken(id, secret, params.Get("scope"))
	})
	if err != nil {
		var oe *OAuthError
		if !errors.As(err, &oe) {
			oe = oauthErr(http.StatusInternalServerError, "server_error", "token issue failed")
		}
		a.writeOAuthError(w, oe)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// unescapeBasic undoes the form-urlencoding RFC 6749 §2.3.1 applies to the
// Basic credentials; a value that does not decode is used as is.
func unescapeBasic(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

func readTokenParams(w http.ResponseWriter, r *http.Request) (url.Values, *OAuthError) {
	if r.URL.Query().Has("client_secret") {
		return nil, oauthErr(http.StatusBadRequest, "invalid_request", "client_secret must not be sent in the URL")
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenReqBody))
	defer clear(body)
	if err != nil {
		return nil, oauthErr(http.StatusBadRequest, "invalid_request", "could not read the request body")
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, oauthErr(http.StatusBadRequest, "invalid_request", "malformed form body")
		}
		for k, vs := range v {
			if len(vs) > 1 {
				return nil, oauthErr(http.StatusBadRequest, "invalid_request", "parameter "+strconv.Quote(k)+" repeated")
			}
		}
		return v, nil
	case "application/json":
		var m map[string]string
		if json.Unmarshal(body, &m) != nil {
			return nil, oauthErr(http.StatusBadRequest, "invalid_request", "the JSON body must be an object of strings")
		}
		v := url.Values{}
		for k, s := range m {
			v.Set(k, s)
		}
		return v, nil
	default:
		return nil, oauthErr(http.StatusBadRequest, "invalid_request", "Content-Type must be application/x-www-form-urlencoded")
	}
}

func (a *Auth) writeOAuthError(w http.ResponseWriter, e *OAuthError) {
	if a.onFailure != nil {
		a.onFailure(SchemeOAuth2, "token endpoint: "+e.Code)
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+a.realm+`"`)
	}
	writeJSON(w, e.Status, e)
}

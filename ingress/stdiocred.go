package ingress

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// The environment variables `e2a acp` reads the editor's credential from
// (the stdio door's WithStdioCredential): an API key, or a bearer or
// OAuth 2.0 access token. ACP's authMethods name them over stdio, where
// the editor sends no headers.
const (
	EnvACPAPIKey      = "E2A_ACP_API_KEY"
	EnvACPBearerToken = "E2A_ACP_BEARER_TOKEN"
)

// stdioCredentialKey is the context key of the credential of
// WithStdioCredential.
type stdioCredentialKey struct{}

// WithStdioCredential returns ctx carrying the credential h that
// ServeACPStdio(ctx, …) presents for each message it reads, as the
// headers of a request would: one X-Api-Key header (an API key) or one
// Authorization header ("Bearer <token>", a static bearer token or an
// OAuth 2.0 access token). Under the server's auth (WithAuth) each
// message is then authenticated with it, so a key removed or a token
// expired stops working mid-session, and its principal owns the
// session's turns exactly as over HTTP; a message it no longer
// authenticates is refused (-32000, or -32003 for a disabled principal).
// A server without auth ignores it (every message is anonymous). h is
// copied; anything else than one credential header with one non-blank
// value is refused with an error wrapping ErrInvalidOption, which never
// quotes the value. It does not authenticate h: a caller that must fail
// at start checks it first (Auth.AuthenticateHeader), as `e2a acp` does.
func WithStdioCredential(ctx context.Context, h http.Header) (context.Context, error) {
	cred := http.Header{}
	for k, vs := range h {
		name := http.CanonicalHeaderKey(k)
		if name != HeaderAPIKey && name != "Authorization" {
			return nil, fmt.Errorf("%w: stdio credential: header %q is not a credential (want %s or Authorization)", ErrInvalidOption, name, HeaderAPIKey)
		}
		for _, v := range vs {
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("%w: stdio credential: empty %s", ErrInvalidOption, name)
			}
			cred.Add(name, v)
		}
	}
	if n := len(cred.Values(HeaderAPIKey)) + len(cred.Values("Authorization")); n != 1 {
		return nil, fmt.Errorf("%w: stdio credential: %d credentials, want one (%s or Authorization)", ErrInvalidOption, n, HeaderAPIKey)
	}
	return context.WithValue(ctx, stdioCredentialKey{}, cred), nil
}

// stdioCredentialHint ends the message of a stdio message's
// authentication refusal: what the editor's user does about it, as the
// editor shows it (the credential lives in the environment it starts e2a
// acp with: the variable the credential of ctx came from, else both).
func stdioCredentialHint(ctx context.Context) string {
	vars := EnvACPAPIKey + " or " + EnvACPBearerToken
	if cred, ok := stdioCredential(ctx); ok {
		vars = EnvACPBearerToken
		if cred.Get(HeaderAPIKey) != "" {
			vars = EnvACPAPIKey
		}
	}
	return "; set " + vars + " to a valid credential in the environment the editor starts e2a acp with, then restart it"
}

// stdioCredential returns the credential of WithStdioCredential in ctx.
func stdioCredential(ctx context.Context) (http.Header, bool) {
	h, ok := ctx.Value(stdioCredentialKey{}).(http.Header)
	return h, ok
}

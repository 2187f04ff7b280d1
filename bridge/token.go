package bridge

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

// WithTokenSource sends each call's Authorization as a token of ts
// ("Bearer <access token>", the token's type as ts gives it): an upstream
// behind OAuth 2.0, whose tokens expire, as an identity provider's
// client-credentials grant issues them (golang.org/x/oauth2/clientcredentials).
// The client keeps the token it got and asks ts for another only when it
// holds none it may send: none yet, one that expires within 10 s
// (oauth2.Token.Valid), or one the upstream answered 401 to (a revoked
// token, a rotated key: the next call gets a new one instead of the
// refusal until the old one expires). So ts should ask its token endpoint
// each time it is called (TokenSourceFunc of clientcredentials.Config's
// Token), not keep a token of its own (clientcredentials.Config's
// TokenSource does). Calls wait for one token at a time. It is asked on
// gRPC too (a2abridge's per-call credentials). An API key sent as
// Authorization, or an Authorization header among the credentials, cannot
// go with it (ErrInvalidOption from NewClient). A call that gets no token
// fails before it is sent, with the *Error tokenError gives.
func WithTokenSource(ts oauth2.TokenSource) ClientOption {
	return option.NotNil(ErrInvalidOption, "token source", ts, func(c *Client) { c.tokens = &tokenCache{src: ts} })
}

// TokenSourceFunc is a token source that is a function: each call asks
// for a new token (WithTokenSource keeps it).
type TokenSourceFunc func() (*oauth2.Token, error)

// Token calls f.
func (f TokenSourceFunc) Token() (*oauth2.Token, error) { return f() }

// tokenCache is the client's token of its source, until it expires or an
// upstream refuses it.
type tokenCache struct {
	src oauth2.TokenSource
	mu  sync.Mutex
	tok *oauth2.Token
}

// Token is the token kept while it is valid, else a new one of src.
func (t *tokenCache) Token() (*oauth2.Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok.Valid() {
		return t.tok, nil
	}
	tok, err := t.src.Token()
	if err != nil {
		return nil, err
	}
	t.tok = tok
	return tok, nil
}

// refused drops the token kept when authorization (a call's header) was
// it, or whatever it is for "": an upstream answered 401 to it.
func (t *tokenCache) refused(authorization string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != nil && (authorization == "" || authorization == t.tok.Type()+" "+t.tok.AccessToken) {
		t.tok = nil
	}
}

// Refused tells the client that an upstream refused a call with header h
// for its credentials (HTTP 401, A2A's unauthenticated error): the token
// it carried, if it is the one kept, is not sent again; with h nil (an
// SDK that does not tell which token its call carried), the one kept is
// not. Do and the HTTP clients call it themselves on a 401.
func (c *Client) Refused(h http.Header) {
	if c.tokens != nil {
		c.tokens.refused(h.Get("Authorization"))
	}
}

// tokenConflict reports the credentials that would set Authorization
// beside a token source.
func (c *Client) tokenConflict() error {
	if c.tokens == nil {
		return nil
	}
	if c.creds.APIKey != "" && c.creds.KeyHeader == "" {
		return fmt.Errorf("%w: an API key sent as a bearer token and an OAuth 2.0 token source together", ErrInvalidOption)
	}
	for k := range c.creds.Headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return fmt.Errorf("%w: an Authorization header and an OAuth 2.0 token source together", ErrInvalidOption)
		}
	}
	return nil
}

// Authorize sets h's Authorization from the client's token source
// (WithTokenSource), if it has one, keeping the token for Scrub; its error
// is tokenError's *Error. Do and the clients HTTP and HTTPRefusing give
// call it on every call; an SDK that makes calls of its own (gRPC) calls
// it for each (a2abridge's per-call credentials).
func (c *Client) Authorize(h http.Header) error {
	if c.tokens == nil {
		return nil
	}
	tok, err := c.tokens.Token()
	if err != nil {
		return tokenError(err)
	}
	if tok.AccessToken == "" {
		return &Error{Code: CodeAuth, Message: "the OAuth 2.0 token source gave no access token", Err: ErrNoToken}
	}
	if last := c.token.Load(); last == nil || *last != tok.AccessToken {
		c.token.Store(&tok.AccessToken)
	}
	h["Authorization"] = []string{tok.Type() + " " + tok.AccessToken}
	return nil
}

// tokenError is the *Error of a failure to get a token: the token
// endpoint's answer by its status as StatusError reads it, where 400 is
// CodeAuth too (RFC 6749 §5.2 answers invalid_client, invalid_grant and
// invalid_scope with 400 or 401: a refusal of the client's credentials,
// which a retry does not change), with its error code and description,
// never its body (a server may echo the request); any other failure (an
// unreachable endpoint, a timeout) as Classify reads it.
func tokenError(err error) *Error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		s := re.Response.StatusCode
		what := re.ErrorCode
		if what == "" {
			what = http.StatusText(s)
		}
		if re.ErrorDescription != "" {
			what += ": " + Clip(strings.Join(strings.Fields(re.ErrorDescription), " "), 200, nil)
		}
		at := ""
		if re.Response.Request != nil && re.Response.Request.URL != nil {
			at = " at " + re.Response.Request.URL.Host // the host alone, as Location shows an upstream
		}
		e := StatusError(s, "the OAuth 2.0 token endpoint"+at+" answered "+strconv.Itoa(s)+" ("+what+")")
		if s == http.StatusBadRequest {
			e.Code = CodeAuth
		}
		e.RetryAfter = retryAfter(re.Response.Header.Get("Retry-After"), time.Now())
		e.Err = fmt.Errorf("%w: %w", ErrNoToken, err)
		return e
	}
	var be *Error
	if !errors.As(Classify(err), &be) {
		return &Error{Code: CodeUnavailable, Retryable: true, Message: "the OAuth 2.0 token endpoint: " + err.Error(), Err: fmt.Errorf("%w: %w", ErrNoToken, err)}
	}
	e := *be
	e.Message = "the OAuth 2.0 token endpoint: " + e.Message
	e.Err = fmt.Errorf("%w: %w", ErrNoToken, err)
	return &e
}

// scrubbing is the credentials Scrub and error pages take out: the
// client's, and the access token sent last.
func (c *Client) scrubbing() Credentials {
	t := c.token.Load()
	if t == nil {
		return c.creds
	}
	cr := c.creds
	cr.Headers = maps.Clone(cr.Headers)
	if cr.Headers == nil {
		cr.Headers = map[string]string{}
	}
	cr.Headers["Authorization"] = "Bearer " + *t
	return cr
}

// tokenBox holds the access token a client sent last (shared by a
// client's copies: WithKeyHeader).
type tokenBox = atomic.Pointer[string]

// HasTokenSource reports whether the client sends tokens of a token source
// (WithTokenSource).
func (c *Client) HasTokenSource() bool { return c.tokens != nil }

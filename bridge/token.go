package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
// TokenSource does). The calls that need a new token share one call of
// ts, each waiting no longer than its own context; ts bounds that call
// itself (the context it gives clientcredentials.Config's Token has a
// deadline). It is asked on
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
// upstream refuses it. A new one is asked for by one fetch at a time,
// which every caller that needs one then waits for, each no longer than
// its own context.
type tokenCache struct {
	src   oauth2.TokenSource
	mu    sync.Mutex
	tok   *oauth2.Token
	fetch *tokenFetch // the fetch under way, nil when none
}

// tokenFetch is one call of the source, whose result its waiters share.
type tokenFetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// Token is the token kept while it is valid, else the one the fetch under
// way (or a new one) gets. It returns ctx's cause when ctx ends first
// (the fetch goes on for the others: the source bounds it).
func (t *tokenCache) Token(ctx context.Context) (*oauth2.Token, error) {
	t.mu.Lock()
	if t.tok.Valid() {
		tok := t.tok
		t.mu.Unlock()
		return tok, nil
	}
	f := t.fetch
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		t.fetch = f
		go t.get(f)
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// get runs fetch f: it calls the source and keeps the token it gives.
func (t *tokenCache) get(f *tokenFetch) {
	tok, err := t.src.Token()
	if err == nil && tok == nil {
		err = errors.New("the token source gave no token")
	}
	t.mu.Lock()
	if err == nil {
		t.tok = tok
	}
	t.fetch = nil
	t.mu.Unlock()
	f.tok, f.err = tok, err
	close(f.done)
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
// it carried, if it is the one kept, is not sent again; with h nil (a
// call whose token is not known), the one kept is not. Do and the HTTP
// clients call it themselves on a 401; an SDK's call reports its own
// through a TokenSlot.
func (c *Client) Refused(h http.Header) {
	if c.tokens != nil {
		c.tokens.refused(h.Get("Authorization"))
	}
}

// TokenSlot records the Authorization that Authorize set for a call made
// with the context WithTokenSlot gave (the last one, when the call made
// several requests): an SDK's interceptor that sees the call refused as
// unauthenticated tells the client which token was (Refused(slot.Header())),
// so that a refusal of a token the client has since replaced does not drop
// the new one. It also records why the call got no token (Err): an SDK
// that turns a failure of its per-call credentials into its own error
// (gRPC's status) loses the token endpoint's code and Retry-After.
type TokenSlot struct {
	v   atomic.Pointer[string]
	err atomic.Pointer[Error]
}

type tokenSlotKey struct{}

// WithTokenSlot is ctx with a new TokenSlot, which Authorize fills for the
// calls made with it.
func WithTokenSlot(ctx context.Context) (context.Context, *TokenSlot) {
	s := new(TokenSlot)
	return context.WithValue(ctx, tokenSlotKey{}, s), s
}

// TokenSlotOf is ctx's TokenSlot (WithTokenSlot), nil when it has none.
func TokenSlotOf(ctx context.Context) *TokenSlot {
	s, _ := ctx.Value(tokenSlotKey{}).(*TokenSlot)
	return s
}

// Header is the Authorization recorded, as a header; nil when none was
// (or s is nil).
func (s *TokenSlot) Header() http.Header {
	if s == nil {
		return nil
	}
	if p := s.v.Load(); p != nil {
		return http.Header{"Authorization": {*p}}
	}
	return nil
}

// Err is the *Error of the call's last failure to get a token
// (Authorize's), nil when its last request got one (or s is nil).
func (s *TokenSlot) Err() error {
	if s == nil {
		return nil
	}
	if e := s.err.Load(); e != nil {
		return e
	}
	return nil
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
// (WithTokenSource), if it has one, keeping the token for Scrub and in
// ctx's TokenSlot (WithTokenSlot); its error is tokenError's *Error, or
// ctx's cause when ctx ends while a token is asked for. Do and the clients
// HTTP and HTTPRefusing give call it on every call; an SDK that makes
// calls of its own (gRPC) calls it for each (a2abridge's per-call
// credentials).
func (c *Client) Authorize(ctx context.Context, h http.Header) error {
	if c.tokens == nil {
		return nil
	}
	slot := TokenSlotOf(ctx)
	tok, err := c.tokens.Token(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return slot.failed(tokenError(err))
	}
	if tok.AccessToken == "" {
		return slot.failed(&Error{Code: CodeAuth, Message: "the OAuth 2.0 token source gave no access token", Err: ErrNoToken})
	}
	c.token.add(tok.AccessToken)
	v := tok.Type() + " " + tok.AccessToken
	h["Authorization"] = []string{v}
	if slot != nil {
		slot.v.Store(&v)
		slot.err.Store(nil)
	}
	return nil
}

// failed records err (an *Error, or what tokenError gives) in s, if
// there is one, and returns it.
func (s *TokenSlot) failed(err error) error {
	if be := new(Error); s != nil && errors.As(err, &be) {
		s.err.Store(be)
	}
	return err
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
	if strings.HasPrefix(err.Error(), "oauth2: cannot fetch token: ") {
		// x/oauth2's error when the endpoint's answer could not be read
		// to its end (a stall, a reset mid-body), which it does not wrap:
		// the endpoint may answer whole next time.
		return &Error{Code: CodeUnavailable, Retryable: true, Message: "the OAuth 2.0 token endpoint's answer was cut short",
			Err: fmt.Errorf("%w: %w", ErrNoToken, err)}
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
// client's, the access tokens it sent last (keptTokens of them: a call
// sent with one the client has since replaced may quote it), its base
// URL's query values and path tokens (urlSecrets) and, for an
// error page, the Authorization its call sent (sent; nil: none).
func (c *Client) scrubbing(sent http.Header) Credentials {
	toks := append(c.token.all(), c.query...)
	if a := sent.Get("Authorization"); a != "" && c.tokens != nil {
		toks = append(toks, a)
	}
	if len(toks) == 0 {
		return c.creds
	}
	cr := c.creds
	cr.tokens = toks
	return cr
}

// keptTokens is how many of the access tokens it sent last a client takes
// out of the upstreams' words (scrubbing).
const keptTokens = 4

// tokenBox holds the access tokens a client sent last, up to keptTokens,
// newest last (shared by a client's copies: WithKeyHeader).
type tokenBox struct {
	mu   sync.Mutex
	last []string
}

// add records tok as sent.
func (b *tokenBox) add(tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.last); n > 0 && b.last[n-1] == tok {
		return
	}
	b.last = append(slices.DeleteFunc(b.last, func(s string) bool { return s == tok }), tok)
	if len(b.last) > keptTokens {
		b.last = slices.Delete(b.last, 0, len(b.last)-keptTokens)
	}
}

// all is the tokens recorded (a copy).
func (b *tokenBox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.last)
}

// HasTokenSource reports whether the client sends tokens of a token source
// (WithTokenSource).
func (c *Client) HasTokenSource() bool { return c.tokens != nil }

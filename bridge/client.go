package bridge

import (
	"bytes"
	"cmp"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/redact"

	"golang.org/x/net/http/httpguts"
)

// Credentials are what the bridge sends the upstream to authenticate: an
// API key (sent as "Authorization: Bearer <key>", the OpenAI convention and
// A2A's bearer scheme) and extra headers (e.g. "X-API-Key"). They are
// secrets: String and LogValue print only which are set, and nothing of
// them is ever written to a frame, a stream or a log.
type Credentials struct {
	APIKey string
	// KeyHeader is the header the API key is sent in, as it is, for an
	// upstream that asks for it there (an A2A agent whose card declares
	// an API key scheme in a header: Client.WithKeyHeader); "" sends it
	// as "Authorization: Bearer <key>".
	KeyHeader string
	Headers   map[string]string
	// tokens are OAuth 2.0 access tokens the client sent (or Authorization
	// values carrying one) and the base URL's secrets (urlSecrets): secrets
	// to scrub, never sent from here.
	tokens []string
}

// String names the credentials without their values.
func (c Credentials) String() string {
	var parts []string
	switch {
	case c.APIKey != "" && c.KeyHeader != "":
		parts = append(parts, "api key in header "+http.CanonicalHeaderKey(c.KeyHeader))
	case c.APIKey != "":
		parts = append(parts, "api key")
	}
	for k := range c.Headers {
		parts = append(parts, "header "+http.CanonicalHeaderKey(k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// LogValue keeps the values out of structured logs.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// GoString keeps the values out of %#v.
func (c Credentials) GoString() string { return "bridge.Credentials{" + c.String() + "}" }

// scrub replaces the credentials' values in s (an upstream's answer
// quoted in an error message) with "[redacted]".
func (c Credentials) scrub(s string) string {
	for _, v := range c.secrets() {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// authSchemes are the HTTP authentication schemes (lower case) whose
// credential follows them in a header value.
var authSchemes = map[string]bool{"bearer": true, "basic": true, "token": true, "digest": true, "apikey": true, "api-key": true}

// minSecret is the shortest header value taken for a secret: a shorter
// one (X-Api-Version: 2) is no credential, and scrubbing it would mangle
// every message that holds its characters.
const minSecret = 6

// secrets are the strings scrub takes out: the API key, every header value
// of minSecret characters or more and, for an Authorization (or
// Proxy-Authorization) value or one that starts with an authentication
// scheme (Bearer tok, Basic …, Token …), its credential alone too (an
// upstream quotes the token without the scheme; a title such as "Acme
// Helpdesk" is no scheme and credential), longest first (a value before a
// part of it).
func (c Credentials) secrets() []string {
	var out []string
	if c.APIKey != "" {
		out = append(out, c.APIKey)
	}
	for _, v := range c.tokens {
		if len(v) >= minSecret {
			out = append(out, v)
		}
	}
	for k, v := range c.Headers {
		if len(v) >= minSecret {
			out = append(out, v)
		}
		scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
		name := http.CanonicalHeaderKey(k)
		if ok && (name == "Authorization" || name == "Proxy-Authorization" || authSchemes[strings.ToLower(scheme)]) {
			if cred = strings.TrimSpace(cred); len(cred) >= minSecret {
				out = append(out, cred)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// scrubCut is scrub for s, the start of a longer text (an answer read up
// to a bound): a start of a credential's value at the end of s (the value
// cut in two by the bound) is taken out too, replaced with "[redacted]".
func (c Credentials) scrubCut(s string) string {
	s = c.scrub(s)
	cut := func(v string) {
		for l := min(len(v)-1, len(s)); l > 0; l-- {
			if strings.HasSuffix(s, v[:l]) {
				s = s[:len(s)-l] + "[redacted]"
				return
			}
		}
	}
	for _, v := range c.secrets() {
		cut(v)
	}
	return s
}

// Scrub replaces the values of the client's credentials (its API key and
// header values) in s with "[redacted]": for an upstream's words quoted in
// an error message. The Handler calls it (through an upstream's Scrubber)
// on every upstream error before logging or writing it.
func (c *Client) Scrub(s string) string { return c.scrubbing(nil).scrub(s) }

// apply sets the credentials on h.
func (c Credentials) apply(h http.Header) {
	switch {
	case c.APIKey != "" && c.KeyHeader != "":
		h.Set(c.KeyHeader, c.APIKey)
	case c.APIKey != "":
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
}

// ClientOption configures a Client.
type ClientOption func(*Client) error

// WithConnectTimeout bounds connecting to the upstream (TCP and TLS); > 0,
// default 5 s.
func WithConnectTimeout(d time.Duration) ClientOption {
	return option.Check(ErrInvalidOption, d > 0, func(c *Client) { c.connect = d }, "connect timeout %v must be > 0", d)
}

// WithIdleTimeout bounds the wait for the answer's headers and, once it
// streams, the silence between two reads of its body; > 0, default 60 s.
// An answer idle for longer fails with ErrIdleTimeout (code
// upstream_timeout); the body of a non-2xx answer is read no longer, and
// the call fails with the status's error (FromResponse).
func WithIdleTimeout(d time.Duration) ClientOption {
	return option.Check(ErrInvalidOption, d > 0, func(c *Client) { c.idle = d }, "idle timeout %v must be > 0", d)
}

// WithMaxBodyBytes bounds the bytes read of one answer's body that is not
// an event stream (Content-Type not text/event-stream) on the clients HTTP
// and HTTPRefusing give an SDK (≥ MinAnswerBytes, default
// DefaultMaxAnswerBytes, the bridge's own answer bound): an SDK reads such
// an answer whole before the bridge sees any of it (a2a-go's JSON-RPC
// SendMessage and GetTask, HTTP+JSON), so WithMaxAnswerBytes, which
// counts the frames written, came too late for an upstream answering a
// huge or endless JSON document. It bounds so the body of a 2xx answer Do
// returns that is one JSON document (application/json or a +json type),
// which the bridges read whole too (an HTTP agent's JSON answer, an
// OpenAI server's chat.completion instead of a stream), within their own
// bound on a frame or an event. The read past the bound fails with an
// *Error upstream_protocol_error, not retryable, wrapping
// ErrAnswerTooLarge, and the call is ended (its connection closed). On
// those clients it bounds one event of an event stream too (the bytes
// from a blank line to the next: a2a-go bounds each line at 10 MB but
// not an event's data lines joined), with the same error; an answer of
// another type Do returns (NDJSON, text, an event stream) is the
// bridge's to bound.
func WithMaxBodyBytes(n int64) ClientOption {
	return option.Check(ErrInvalidOption, n >= MinAnswerBytes, func(c *Client) { c.maxBody = n },
		"max body bytes %d must be ≥ %d", n, MinAnswerBytes)
}

// WithCredentials sets what the client sends the upstream to authenticate.
// Header names and values must be valid (a value with a line feed or
// another control character, as an API key read from a file with its
// newline, is refused: every call would fail); Authorization in Headers
// and an API key together are refused (one would overwrite the other), as
// are a KeyHeader that is no header name or that Headers sets too. The
// errors never quote a value.
func WithCredentials(cr Credentials) ClientOption {
	return func(c *Client) error {
		if !validHeaderValue(cr.APIKey) {
			return fmt.Errorf("%w: the API key holds a control character (a trailing newline?)", ErrInvalidOption)
		}
		keyIn := "Authorization"
		if cr.KeyHeader != "" {
			if !httpguts.ValidHeaderFieldName(cr.KeyHeader) {
				return fmt.Errorf("%w: API key header name %q", ErrInvalidOption, cr.KeyHeader)
			}
			keyIn = http.CanonicalHeaderKey(cr.KeyHeader)
		}
		for k, v := range cr.Headers {
			if !httpguts.ValidHeaderFieldName(k) {
				return fmt.Errorf("%w: header name %q", ErrInvalidOption, k)
			}
			if !validHeaderValue(v) {
				return fmt.Errorf("%w: the value of header %q holds a control character", ErrInvalidOption, k)
			}
			if cr.APIKey != "" && http.CanonicalHeaderKey(k) == keyIn {
				return fmt.Errorf("%w: an API key and a %s header together", ErrInvalidOption, keyIn)
			}
		}
		c.creds = cr
		return nil
	}
}

// WithKeyHeader returns a client like c whose API key goes in header
// name, as it is (Credentials.KeyHeader); c is unchanged. It returns c
// itself when c has no API key, or when its Headers set that header (the
// operator's own value wins). Errors wrap ErrInvalidOption.
func (c *Client) WithKeyHeader(name string) (*Client, error) {
	if c.creds.APIKey == "" {
		return c, nil
	}
	for k := range c.creds.Headers {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(name) {
			return c, nil
		}
	}
	cr := c.creds
	cr.KeyHeader = name
	moved := *c
	if err := WithCredentials(cr)(&moved); err != nil {
		return nil, err
	}
	return &moved, nil
}

// validHeaderValue reports whether v may be an HTTP header's value: no
// control character but tab (RFC 9110 field-value).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// WithTransport replaces the client's transport (tests, proxies). The
// connect timeout is then the transport's own; the idle timeout still
// bounds the wait for the answer's headers.
func WithTransport(rt http.RoundTripper) ClientOption {
	return option.NotNil(ErrInvalidOption, "transport", rt, func(c *Client) { c.rt = rt })
}

// headerWait bounds the wait for an answer's headers to d (the client's
// idle timeout) from when the request was sent whole (httptrace's
// WroteRequest, as net/http's ResponseHeaderTimeout counts, on HTTP/1.1
// and HTTP/2 alike), and the time before that to d as well (a transport of
// the caller's, whose connect timeout is its own): a call without headers
// by then is cancelled and fails with ErrAwaitingAnswer, or ErrIdleTimeout
// when its request was not sent (IdleWatch).
type headerWait struct {
	rt http.RoundTripper
	d  time.Duration
}

func (t headerWait) RoundTrip(r *http.Request) (*http.Response, error) {
	c := new(watchedCall) // one allocation for the call's watch, trace and body
	ctx := c.start(r.Context(), t.d)
	c.trace.WroteRequest = c.wrote
	resp, err := t.rt.RoundTrip(r.WithContext(httptrace.WithClientTrace(ctx, &c.trace)))
	if cause := c.Stop(); cause != nil {
		if err == nil {
			_ = resp.Body.Close()
		}
		c.End()
		return nil, fmt.Errorf("%w: no answer within %v", cause, t.d)
	}
	if err != nil {
		c.End()
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// A protocol switch, which no bridge asks for: net/http makes its
		// body the raw connection, which neither the call's context nor
		// the idle timeout ends, so a read of it (Do quoting it as an
		// error page, an SDK reading it) waited for as long as the
		// upstream held the connection. The answer is its status alone,
		// and the connection is closed.
		_ = resp.Body.Close()
		resp.Body = http.NoBody
	}
	c.body, resp.Body = resp.Body, c
	return resp, nil
}

// watchedCall is a call headerWait watches: its IdleWatch, the trace
// that tells it the request was sent, and, once the answer has begun, the
// answer's body, whose Close ends the call's context.
type watchedCall struct {
	IdleWatch
	trace httptrace.ClientTrace
	body  io.ReadCloser
}

func (c *watchedCall) wrote(i httptrace.WroteRequestInfo) {
	if i.Err == nil {
		c.Sent()
	}
}

func (c *watchedCall) Read(p []byte) (int, error) { return c.body.Read(p) }

func (c *watchedCall) Close() error {
	err := c.body.Close()
	c.End()
	return err
}

// cancelOnClose ends a call's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	end func()
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

// Client calls one upstream over HTTP: the bridges' shared transport,
// timeouts, credentials and trace propagation. It is safe for concurrent
// use.
type Client struct {
	base    *url.URL
	connect time.Duration
	idle    time.Duration
	creds   Credentials
	tls     *tls.Config // WithTLSConfig; nil: the system's roots
	rt      http.RoundTripper
	tokens  *tokenCache // WithTokenSource
	token   *tokenBox   // the access token sent last, for Scrub
	query   []string    // the base URL's query values and path tokens, for Scrub (urlSecrets)
	maxBody int64       // WithMaxBodyBytes
}

// NewClient returns the client of the upstream at base (an absolute http or
// https URL: ErrBadUpstreamURL otherwise).
func NewClient(base string, opts ...ClientOption) (*Client, error) {
	u, err := ParseURL(base)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, connect: 5 * time.Second, idle: 60 * time.Second, token: new(tokenBox), query: urlSecrets(u),
		maxBody: DefaultMaxAnswerBytes}
	if err := option.Apply(ErrInvalidOption, c, opts); err != nil {
		return nil, err
	}
	if err := c.tokenConflict(); err != nil {
		return nil, err
	}
	if c.rt != nil {
		if c.tls != nil {
			return nil, fmt.Errorf("%w: a TLS configuration with a transport of the caller's (give the transport its TLS)", ErrInvalidOption)
		}
	} else {
		d := &net.Dialer{Timeout: c.connect, KeepAlive: 30 * time.Second}
		c.rt = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         d.DialContext,
			TLSClientConfig:     c.TLSConfig(),
			TLSHandshakeTimeout: c.connect,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}
	}
	// The answer's headers are waited for here, not by the transport's
	// ResponseHeaderTimeout, whose error (in two wordings, HTTP/1.1's
	// and HTTP/2's) wraps nothing to tell it by.
	c.rt = headerWait{rt: c.rt, d: c.idle}
	return c, nil
}

// WithTLSConfig sets the TLS of calls to an https upstream (a copy of
// cfg is kept): the authorities its certificate is checked against
// (RootCAs; nil: the system's roots, which SSL_CERT_FILE can name) and the
// client certificate it presents when asked (Certificates: mutual TLS, an
// A2A agent whose card declares mtlsSecurityScheme). It cannot go with
// WithTransport (that transport's TLS is the caller's).
func WithTLSConfig(cfg *tls.Config) ClientOption {
	return option.NotNil(ErrInvalidOption, "TLS configuration", cfg, func(c *Client) { c.tls = cfg.Clone() })
}

// TLSConfig is the TLS configuration of the client's calls, for an SDK
// that dials on its own (a2a-go's gRPC transport): WithTLSConfig's, else
// the system's roots. It is a new value each call.
func (c *Client) TLSConfig() *tls.Config {
	if c.tls != nil {
		return c.tls.Clone()
	}
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

// noRedirect is the CheckRedirect of the clients the SDKs are given:
// redirects are not followed, as Do does not follow them: the upstream is
// what the operator configured, and a redirect would carry its
// credentials elsewhere.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// roundTrip sends req on the client's transport: what an http.Client
// with noRedirect and no timeout does (a redirect is the answer), without
// the copy of the request's headers it makes for the redirects it would
// follow (7.5–9 µs a call in the bridge's profiles at 16 clients,
// docs/performance.md "Goroutines kept, again"). A failure is the *url.Error Client.Do returns, so
// its message reads the same ("Post \"http://…\": …"; errMessage names
// the URL by its scheme and host).
func (c *Client) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		op := cmp.Or(req.Method, http.MethodGet)
		op = op[:1] + strings.ToLower(op[1:]) // as net/http's urlErrorOp
		return nil, &url.Error{Op: op, URL: req.URL.String(), Err: err}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody // as http.Client.Do guarantees
	}
	return resp, nil
}

// CloseDelimited reports whether resp's body ends when the connection
// closes (no length, no chunks: Python's http.server, HTTP/1.0), so that
// its end may be the connection's, not the upstream's: a value it cuts
// short is a cut (upstream_unavailable, retryable), not a bad answer. Not
// so a decompressed body (its length is the transport's to drop; a cut
// one fails to inflate) or an HTTP/2 one (a cut stream is a stream
// error): their end is the upstream's.
func CloseDelimited(resp *http.Response) bool {
	return resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && resp.ProtoMajor == 1 && !resp.Uncompressed
}

// ParseURL checks an upstream URL: absolute, http or https, with a host,
// without user info (credentials go in Credentials, never in a URL that
// logs print). Its errors never show s as given, which may hold a
// password, a token in its query or a webhook's token in its path: a URL
// with a host is shown as [redact.URL] shows it (scheme and host, "/…"
// for a path or query), one without is not shown at all.
func ParseURL(s string) (*url.URL, error) {
	if s != "" && !strings.Contains(s, "://") {
		// The usual slip, 127.0.0.1:8001 for http://127.0.0.1:8001: it
		// does not parse, or parses as a scheme without a host.
		return nil, fmt.Errorf("%w: the upstream URL given has no scheme (want http://host[:port][/path], or https://)", ErrBadUpstreamURL)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: the upstream URL given does not parse", ErrBadUpstreamURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: the upstream URL given names no host (want http://host[:port][/path])", ErrBadUpstreamURL)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: %q", ErrBadUpstreamURL, redact.URL(s))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: %q holds credentials (use E2A_UPSTREAM_API_KEY or headers)", ErrBadUpstreamURL, redact.URL(s))
	}
	return u, nil
}

// Probe checks that the upstream can be called, before a pool starts:
// a GET of path (relative to the base URL; "" for the base itself) with
// the client's credentials, and returns the answer's status. Any answer
// but 401 and 403 is enough (a 404 or 405 still shows a server there);
// otherwise it returns the call's *Error: upstream_unreachable,
// upstream_timeout, a TLS or protocol failure, upstream_auth for
// refused credentials, or no token of its token source (ErrNoToken,
// whatever the token endpoint answered). With body non-nil, a 2xx
// answer's body is given to it (read under the idle timeout, as every
// answer's, but not under the body bound: body bounds its reading)
// before Probe returns.
func (c *Client) Probe(ctx context.Context, path string, body func(io.Reader)) (int, error) {
	u := c.Base()
	if path != "" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/" + strings.TrimPrefix(path, "/")
		u.RawPath = ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req, nil)
	if err == nil {
		if body != nil {
			// Not under the body bound, which is an answer's: body
			// bounds its own reading (a model list of some MB).
			var r io.Reader = resp.Body
			if b, ok := resp.Body.(*boundedBody); ok {
				r = b.rc
			}
			body(r)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	var be *Error
	if errors.As(err, &be) && be.Status != 0 && be.Code != CodeAuth && !errors.Is(err, ErrNoToken) {
		return be.Status, nil
	}
	return 0, err
}

// urlSecrets are the parts of u that may be a secret, for Scrub: the
// values of its query parameters of minSecret characters or more (a query
// may carry a key: ?key=…, ?api-key=…, a gateway's ?token=…) and the
// segments of its path that read as a token (minPathSecret characters or
// more, a digit among them: a webhook's path may be its token, as
// Slack's, n8n's and Zapier's are), as given and decoded. Location keeps
// them out of the logs; an upstream that quotes the URL it was called at
// (a 404 naming the route, an error page echoing the request) must not get
// them into a log or an e2a.error frame either.
func urlSecrets(u *url.URL) []string {
	var out []string
	add := func(raw string, unescape func(string) (string, error), secret func(string) bool) {
		vals := []string{raw}
		if v, err := unescape(raw); err == nil && v != raw {
			vals = append(vals, v)
		}
		for _, v := range vals {
			if secret(v) {
				out = append(out, v)
			}
		}
	}
	for _, p := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		_, raw, _ := strings.Cut(p, "=")
		add(raw, url.QueryUnescape, func(v string) bool { return len(v) >= minSecret })
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		add(seg, url.PathUnescape, func(v string) bool {
			return len(v) >= minPathSecret && strings.ContainsAny(v, "0123456789")
		})
	}
	return out
}

// minPathSecret is the shortest path segment taken for a token
// (urlSecrets): shorter ones, and those without a digit, are a route's
// words (v1, chat, completions, agent), which scrubbing would mangle in
// every message naming them.
const minPathSecret = 16

// Base is the upstream's base URL.
func (c *Client) Base() *url.URL { u := *c.base; return &u }

// Name is the upstream's scheme and host, what metrics and logs name it
// by.
func (c *Client) Name() string { return c.base.Scheme + "://" + c.base.Host }

// Location is the upstream's base URL as start-up messages and logs show
// it, as every upstream URL is shown ([redact.URL]): scheme and host, "/…"
// standing for a path or query, since a webhook's path may be its token
// and a query may carry a key (?key=…); user info ParseURL refuses. Two
// upstreams on one host still read apart where a wrong base URL makes
// the difference (http://host:8000 and http://host:8000/…). Name is the
// scheme and host alone: metrics are labelled by it.
func (c *Client) Location() string { return redact.URL(c.base.String()) }

// IdleTimeout is the client's idle timeout.
func (c *Client) IdleTimeout() time.Duration { return c.idle }

// ConnectTimeout is the bound on connecting to the upstream
// (WithConnectTimeout).
func (c *Client) ConnectTimeout() time.Duration { return c.connect }

// HTTP returns an *http.Client that sets the credentials and the trace
// context on every request, for SDKs that take one (the A2A client); it
// applies no idle timeout to bodies (the SDK reads them), only the
// transport's header timeout.
func (c *Client) HTTP() *http.Client {
	return &http.Client{Transport: headerTransport{c}, CheckRedirect: noRedirect}
}

type headerTransport struct{ c *Client }

// HTTPRefusing is HTTP, with the answers refuse picks turned into the
// *Error their status stands for (FromResponse: 429 rate limited, 5xx
// unavailable, 401/403 auth, with Retry-After; the credentials scrubbed
// from the quoted body) before the SDK reads them. An SDK that reads a
// non-2xx answer into a bare message loses its status and Retry-After:
// a2a-go's JSON-RPC client answers "unexpected HTTP status: 503", which
// Classify can only call a protocol error.
func (c *Client) HTTPRefusing(refuse func(*http.Response) bool) *http.Client {
	return &http.Client{Transport: refusingTransport{c, refuse}, CheckRedirect: noRedirect}
}

type refusingTransport struct {
	c      *Client
	refuse func(*http.Response) bool
}

func (t refusingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	resp, err := headerTransport{t.c}.RoundTrip(r.WithContext(ctx))
	switch {
	case err != nil:
		cancel(nil)
		return nil, err
	case !t.refuse(resp):
		resp.Body = cancelOnClose{resp.Body, func() { cancel(nil) }}
		return resp, nil
	}
	// The error page is read under the idle timeout, as Do reads it.
	defer cancel(nil)
	resp.Body = newIdleBody(resp.Body, t.c.idle, cancel)
	// The request sent is headerTransport's copy of r, with its token.
	sent := r.Header
	if resp.Request != nil {
		sent = resp.Request.Header
	}
	return nil, fromResponse(resp, t.c.scrubbing(sent))
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := startCallSpan(r.Context(), r)
	r = r.Clone(ctx)
	t.c.SetHeaders(ctx, r.Header, nil)
	if err := t.c.Authorize(ctx, r.Header); err != nil {
		endCallSpan(span, nil, err, t.c.Scrub)
		return nil, err
	}
	resp, err := t.c.rt.RoundTrip(r)
	endCallSpan(span, resp, err, t.c.Scrub)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		t.c.Refused(r.Header)
	}
	switch {
	case resp.Body == nil:
	case eventStream(resp):
		resp.Body = &eventBound{rc: resp.Body, max: t.c.maxBody}
	default:
		resp.Body = &boundedBody{rc: resp.Body, max: t.c.maxBody}
	}
	return resp, nil
}

// eventStream reports an answer that is an event stream (text/event-stream).
func eventStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// boundedBody is an answer's body (WithMaxBodyBytes) that fails once more
// than max bytes were read: the read past the bound returns the *Error
// (and every later one), and closes the body, which ends the call (an
// HTTP/1.1 connection closed, an HTTP/2 stream reset) rather than leave
// the upstream writing into it. It reads no more than one byte past max
// from the transport.
type boundedBody struct {
	rc   io.ReadCloser
	max  int64
	n    int64
	over *Error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.over != nil {
		return 0, b.over
	}
	if left := b.max - b.n + 1; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.rc.Read(p)
	if b.n += int64(n); b.n > b.max {
		b.over = tooLarge(b.rc, "answer", b.max, "an answer that is no event stream")
		return 0, b.over
	}
	return n, err
}

// tooLarge closes rc, a body read past its bound max, which ends the call,
// and returns the *Error of the what (answer, event) of the body larger
// than the bound on what it is (of).
func tooLarge(rc io.ReadCloser, what string, max int64, of string) *Error {
	_ = rc.Close()
	return &Error{Code: CodeProtocol, Err: ErrAnswerTooLarge, Message: fmt.Sprintf(
		"upstream %s is larger than %d bytes, the most the bridge reads of %s", what, max, of)}
}

// Close closes the body (again, when it passed the bound: net/http's
// bodies take a second Close).
func (b *boundedBody) Close() error { return b.rc.Close() }

// eventBound is an event stream's body on the clients HTTP and
// HTTPRefusing give an SDK (WithMaxBodyBytes): it fails once one event,
// the bytes from a blank line to the next, passes max bytes. a2a-go
// bounds each line of an event stream (10 MB) but joins an event's data
// lines with no bound on their sum, so an upstream sending data lines
// without the blank line that ends an event (never silent for the idle
// timeout, writing no frame for the answer bound to count) grew the
// worker's memory without end. A line ends at a line feed, and is blank
// when it is empty or a carriage return alone, as a2a-go reads them (a
// lone carriage return ends no line there, so none here). The read past
// the bound returns the *Error (and every later one) and closes the body,
// as boundedBody does.
type eventBound struct {
	rc   io.ReadCloser
	max  int64
	n    int64 // the bytes of the event so far
	line int64 // the bytes of the line so far
	cr   bool  // the line so far starts with a carriage return
	over *Error
}

func (b *eventBound) Read(p []byte) (int, error) {
	if b.over != nil {
		return 0, b.over
	}
	n, err := b.rc.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		if b.line == 0 {
			b.cr = rest[0] == '\r'
		}
		i := bytes.IndexByte(rest, '\n')
		switch {
		case i < 0:
			b.line += int64(len(rest))
			b.n += int64(len(rest))
			rest = nil
		case b.line+int64(i) == 0 || b.line+int64(i) == 1 && b.cr:
			b.n, b.line, rest = 0, 0, rest[i+1:] // a blank line: the event ended
		default:
			b.n += int64(i) + 1
			b.line, rest = 0, rest[i+1:]
		}
		// A carriage return alone so far may be a blank line's.
		if b.n > b.max && (b.line != 1 || !b.cr) {
			b.over = tooLarge(b.rc, "event", b.max, "one event of an event stream")
			return 0, b.over
		}
	}
	return n, err
}

// Close closes the body (again, when it passed the bound).
func (b *eventBound) Close() error { return b.rc.Close() }

// SetHeaders sets the credentials and the W3C trace context on h: the
// context of ctx's span when tracing is on, else the request's own
// (env.Trace, as the client sent it), so the upstream joins the request's
// trace either way. Only a valid trace context is sent ([e2a.CleanTrace]:
// an envelope published straight onto NATS may carry any): an invalid
// traceparent is not propagated, and no header value fails the call. A
// token of WithTokenSource is Authorize's.
func (c *Client) SetHeaders(ctx context.Context, h http.Header, env *e2a.Envelope) {
	c.creds.apply(h)
	tc := tracing.Inject(ctx)
	if (tc == nil || tc.Traceparent == "") && env != nil {
		tc = e2a.CleanTrace(env.Trace)
	}
	if tc != nil && tc.Traceparent != "" {
		// Set under their canonical names, as Header.Set would, without
		// its canonicalizing into a new string each call.
		h["Traceparent"] = []string{tc.Traceparent}
		if tc.Tracestate != "" {
			h["Tracestate"] = []string{tc.Tracestate}
		}
	}
}

// Do sends req (its headers completed by SetHeaders with env) and returns
// the answer when it is 2xx; any other status is an *Error (FromResponse,
// its body read under the idle timeout too), a transport failure is
// classified (Classify). The body of the answer is guarded by the idle
// timeout: a read that waits longer fails with ErrIdleTimeout and the
// request is cancelled; a transport failure while reading it (a reset,
// an HTTP/2 stream error) is, by Classify, upstream_unavailable. A body
// that is one JSON document (application/json, +json) is read up to the
// body bound (WithMaxBodyBytes). The caller closes it.
func (c *Client) Do(req *http.Request, env *e2a.Envelope) (*http.Response, error) {
	ctx, span := startCallSpan(req.Context(), req)
	ctx, cancel := context.WithCancelCause(ctx)
	req = req.WithContext(ctx)
	c.SetHeaders(ctx, req.Header, env)
	if err := c.Authorize(ctx, req.Header); err != nil {
		cancel(nil)
		endCallSpan(span, nil, err, c.Scrub)
		return nil, err
	}
	resp, err := c.roundTrip(req)
	endCallSpan(span, resp, err, c.Scrub)
	if err != nil {
		cancel(nil)
		if cause := context.Cause(ctx); errors.Is(cause, ErrIdleTimeout) {
			err = cause
		}
		return nil, classifyCall(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel(nil)
		// The error page is read under the idle timeout too: one that
		// stalls is cut there, and the status's error is returned all the
		// same (fromResponse quotes what came). An upstream may echo the
		// request's headers in its error page.
		resp.Body = newIdleBody(resp.Body, c.idle, cancel)
		if resp.StatusCode == http.StatusUnauthorized {
			c.Refused(req.Header)
		}
		return nil, fromResponse(resp, c.scrubbing(req.Header))
	}
	body := newIdleBody(resp.Body, c.idle, cancel)
	body.mark = true // bodyReader's marking, without its own allocation
	resp.Body = body
	if jsonDocument(resp.Header.Get("Content-Type")) {
		// One document, which a bridge reads whole (an HTTP agent's
		// JSON answer, an OpenAI server's chat.completion).
		resp.Body = &boundedBody{rc: body, max: c.maxBody}
	}
	return resp, nil
}

// jsonDocument reports a Content-Type of one JSON document:
// application/json or a +json type, parameters aside, in any case (not
// application/x-ndjson, a stream of them). It does not allocate.
func jsonDocument(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	const suffix = "+json"
	return strings.EqualFold(mt, "application/json") ||
		len(mt) > len(suffix) && strings.EqualFold(mt[len(mt)-len(suffix):], suffix)
}

// bodyReader marks the transport's failures to read a 2xx answer's body
// (a connection reset, an HTTP/2 stream reset, GOAWAY or lost connection)
// as a *bodyError, which Classify reads as an answer cut short. The end
// of the body (io.EOF) and a body the transport could not decompress (not
// a transport failure: the answer itself is garbage) are left as they are.
type bodyReader struct{ io.ReadCloser }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !isDecodeError(err) {
		err = &bodyError{err: err}
	}
	return n, err
}

// isDecodeError reports a failure to decompress a body the transport
// asked gzip for.
func isDecodeError(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt)
}

// BodyCancel returns the function that ends the call whose answer's
// body is body (one Do returned): a read of it waiting for the upstream
// fails then, the call's context cancelled with the cause given (as Do's
// idle timeout ends it). It is nil for any other body.
func BodyCancel(body io.ReadCloser) context.CancelCauseFunc {
	if b, ok := body.(*boundedBody); ok {
		body = b.rc
	}
	if b, ok := body.(*idleBody); ok {
		return b.cancel
	}
	return nil
}

// idleBody fails a read that waits longer than idle, cancelling the
// request (which unblocks the read) with ErrIdleTimeout as the cause.
// A read that returns bytes only notes when it did (a read per event of
// a streamed answer reset the timer, which locks the runtime's timers):
// the timer, at its end, waits on for what is left of the idle timeout
// since then.
type idleBody struct {
	rc     io.ReadCloser
	idle   time.Duration
	cancel context.CancelCauseFunc
	timer  *time.Timer
	// start is when the body was made; last, when a read last returned
	// bytes (since start).
	start time.Time
	last  atomic.Int64
	fired atomic.Bool
	// closed: the timer is not restarted.
	closed atomic.Bool
	// mark: the transport's read failures are marked as bodyReader marks
	// them (a 2xx answer's body).
	mark bool
}

func newIdleBody(rc io.ReadCloser, idle time.Duration, cancel context.CancelCauseFunc) *idleBody {
	b := &idleBody{rc: rc, idle: idle, cancel: cancel, start: time.Now()}
	b.timer = time.AfterFunc(idle, b.fire)
	return b
}

func (b *idleBody) fire() {
	if b.closed.Load() {
		return
	}
	if left := b.idle - (time.Since(b.start) - time.Duration(b.last.Load())); left > 0 {
		b.timer.Reset(left) // bytes came since the timer was set
		return
	}
	b.fired.Store(true)
	b.cancel(ErrIdleTimeout)
}

func (b *idleBody) Read(p []byte) (int, error) {
	var n int
	var err error
	if b.mark {
		n, err = bodyReader{b.rc}.Read(p)
	} else {
		n, err = b.rc.Read(p)
	}
	if b.fired.Load() {
		return n, ErrIdleTimeout
	}
	if n > 0 {
		b.last.Store(int64(time.Since(b.start)))
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.closed.Store(true)
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

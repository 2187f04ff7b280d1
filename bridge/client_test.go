package bridge

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestClassify: every kind of failure gets its code and a truthful
// retryable; the request's own cancel and the runtime's errors are left
// as they are.
func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name      string
		err       error
		code      string
		retryable bool
	}{
		{"idle timeout", fmt.Errorf("read: %w", ErrIdleTimeout), CodeTimeout, true},
		{"deadline", context.DeadlineExceeded, CodeTimeout, true},
		{"net timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, CodeTimeout, true},
		{"dial refused", &url.Error{Op: "Post", URL: "http://x", Err: refused}, CodeUnreachable, true},
		{"dns", &net.DNSError{Err: "no such host", Name: "nowhere.invalid"}, CodeUnreachable, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, CodeUnavailable, true},
		{"EOF", io.EOF, CodeUnavailable, true},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, CodeUnavailable, true},
		{"anything else", errors.New("tls: bad certificate"), CodeProtocol, false},
		// What net/http's HTTP/2 client returns when the upstream resets
		// the stream or the connection mid-body: a body read failure.
		{"h2 stream reset mid-body", &bodyError{errors.New("stream error: stream ID 1; INTERNAL_ERROR; received from peer")}, CodeUnavailable, true},
		{"h2 GOAWAY mid-body", fmt.Errorf("openai: reading the stream: %w", &bodyError{errors.New("http2: server sent GOAWAY and closed the connection")}), CodeUnavailable, true},
		{"h2 connection lost mid-body", &bodyError{errors.New("http2: client connection lost")}, CodeUnavailable, true},
		{"a timeout mid-body", &bodyError{&net.OpError{Op: "read", Err: timeoutErr{}}}, CodeTimeout, true},
		{"the same error, not a body's", errors.New("stream error: stream ID 1; INTERNAL_ERROR; received from peer"), CodeProtocol, false},
		{"an *Error stays", Errorf(CodeAuth, false, "no"), CodeAuth, false},
		{"a wrapped *Error", fmt.Errorf("x: %w", Errorf(CodeFailed, true, "f")), CodeFailed, true},
	} {
		var be *Error
		if !errors.As(Classify(c.err), &be) || be.Code != c.code || be.Retryable != c.retryable {
			t.Errorf("%s: %#v, want %s retryable=%v", c.name, Classify(c.err), c.code, c.retryable)
		}
	}
	for _, err := range []error{
		context.Canceled, fmt.Errorf("x: %w", context.Canceled), agent.ErrFenced, agent.ErrWriterClosed,
		agent.ErrFinalWritten, agent.Errorf(e2a.ErrCodeFrameTooLarge, false, "big"), &bodyError{context.Canceled},
	} {
		if got := Classify(err); got != err {
			t.Errorf("Classify(%v) = %v, want it unchanged", err, got)
		}
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
	// The message keeps no query string (a key may be in it).
	be := Classify(&url.Error{Op: "Post", URL: "http://h/p?key=sk-123", Err: errors.New("boom")}).(*Error)
	if strings.Contains(be.Message, "sk-123") {
		t.Errorf("message %q holds the query", be.Message)
	}
	// Nor the URL's path (a webhook's token may be in it): the upstream
	// is named by its scheme and host, as Upstream.Name names it.
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	be = Classify(&url.Error{Op: "Post", URL: "http://h:8080/webhook/wh-5e8f0a77?key=sk-123", Err: dial}).(*Error)
	if be.Code != CodeUnreachable || strings.Contains(be.Message, "wh-5e8f0a77") || strings.Contains(be.Message, "sk-123") ||
		!strings.Contains(be.Message, `"http://h:8080"`) {
		t.Errorf("unreachable: %s %q, want the URL named by scheme and host only", be.Code, be.Message)
	}
}

// TestClip: an upstream's words are cut to n characters (runes; an
// invalid byte counts as one, kept as it is), with "…" when cut, after
// the scrub: a credential the cut would split is taken out whole first.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"}, {"abcd", 3, "abc…"}, {"héllo", 2, "hé…"}, {"a\xffbc", 2, "a\xff…"}, {"", 5, ""},
	} {
		if got := Clip(c.in, c.n, nil); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	const key = "sk-clip-0123456789abcdef"
	cr := Credentials{APIKey: key}
	if got := Clip("refused: Bearer "+key+" by the gateway", 24, cr.scrub); strings.Contains(got, key[:4]) || got != "refused: Bearer [redacte…" {
		t.Errorf("Clip of a key the cut splits: %q, want it redacted before the cut", got)
	}
}

// TestFromResponseCredentialAtTheBound: an error page is read up to its
// bound (2 KiB); a credential the bound cuts in two (an error page
// quoting the request's headers after much blank space, which the message
// collapses) is no longer found by a scrub of what was read: its start,
// at the end of what was read, is taken out too.
func TestFromResponseCredentialAtTheBound(t *testing.T) {
	const key = "sk-bound-0123456789abcdef"
	const header = "hdr-secret-9876543210"
	for name, cr := range map[string]Credentials{"api key": {APIKey: key}, "header": {Headers: map[string]string{"X-Api-Key": header}}} {
		secret := key
		if cr.APIKey == "" {
			secret = header
		}
		body := strings.Repeat(" ", maxErrorBody-len("Bearer ")-12) + "Bearer " + secret + " was refused"
		e := fromResponse(&http.Response{StatusCode: 401, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, cr)
		if strings.Contains(e.Message, secret[:4]) || !strings.HasSuffix(e.Message, "Bearer [redacted]") {
			t.Errorf("%s: %q, want the secret's start at the bound redacted", name, e.Message)
		}
	}
	// What fits the bound is not touched at its end.
	e := fromResponse(&http.Response{StatusCode: 401, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("no s"))}, Credentials{APIKey: key})
	if e.Message != "upstream answered 401: no s" {
		t.Errorf("short body: %q", e.Message)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestFromResponse: the status decides the code and retryable; the
// message quotes the body's start on one line; Retry-After is read in
// both forms, bounded.
func TestFromResponse(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		status    int
		code      string
		retryable bool
	}{
		{429, CodeRateLimited, true}, {408, CodeUnavailable, true}, {500, CodeUnavailable, true},
		{503, CodeUnavailable, true}, {504, CodeUnavailable, true}, {401, CodeAuth, false},
		{403, CodeAuth, false}, {400, CodeRejected, false}, {404, CodeRejected, false}, {422, CodeRejected, false},
	} {
		e := FromResponse(&http.Response{StatusCode: c.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("  line one\n\tline two "))})
		if e.Code != c.code || e.Retryable != c.retryable || e.Status != c.status ||
			e.Message != fmt.Sprintf("upstream answered %d: line one line two", c.status) {
			t.Errorf("%d: %+v", c.status, e)
		}
	}
	e := FromResponse(&http.Response{StatusCode: 502, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(strings.Repeat("é", 300)))})
	if n := len([]rune(e.Message)); n > len("upstream answered 502: ")+201 || !strings.HasSuffix(e.Message, "…") {
		t.Errorf("long body: %d runes %q", n, e.Message)
	}
	e = FromResponse(&http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))})
	if e.Message != "upstream answered 503: Service Unavailable" {
		t.Errorf("empty body: %q", e.Message)
	}
	for v, want := range map[string]time.Duration{
		"":       0,
		"7":      7 * time.Second,
		" 2 ":    2 * time.Second,
		"-3":     0,
		"soon":   0,
		"100000": 5 * time.Minute,
		now.Add(-time.Hour).UTC().Format(http.TimeFormat): 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
	if got := retryAfter(now.Add(90*time.Second).UTC().Format(http.TimeFormat), now); got < 88*time.Second || got > 90*time.Second {
		t.Errorf("Retry-After date: %v", got)
	}
	e = FromResponse(&http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"3"}}, Body: io.NopCloser(strings.NewReader(""))})
	if e.RetryAfter != 3*time.Second {
		t.Errorf("429 Retry-After: %v", e.RetryAfter)
	}
}

// TestCredentialsHidden: no printing of credentials shows a value.
func TestCredentialsHidden(t *testing.T) {
	cr := Credentials{APIKey: "sk-secret-1", Headers: map[string]string{"x-api-key": "hdr-secret-2"}}
	var log testkit.Buffer
	slog.New(slog.NewJSONHandler(&log, nil)).Info("creds", "c", cr, "p", &cr)
	slog.New(slog.NewTextHandler(&log, nil)).Info("creds", "c", cr)
	for _, s := range []string{cr.String(), fmt.Sprint(cr), fmt.Sprintf("%v %+v %#v %s", cr, cr, cr, cr), log.String()} {
		if strings.Contains(s, "secret") {
			t.Errorf("a credential shows: %s", s)
		}
	}
	if cr.String() != "api key, header X-Api-Key" || (Credentials{}).String() != "none" {
		t.Errorf("String: %q", cr.String())
	}
	if s := (Credentials{APIKey: "sk-secret-1", KeyHeader: "x-agent-key"}).String(); s != "api key in header X-Agent-Key" {
		t.Errorf("String: %q", s)
	}
	if got := cr.scrub("echo: Bearer sk-secret-1 / hdr-secret-2"); got != "echo: Bearer [redacted] / [redacted]" {
		t.Errorf("scrub: %q", got)
	}
}

// TestParseURL: only absolute http(s) URLs with a host and no user info.
func TestParseURL(t *testing.T) {
	for _, s := range []string{"", "localhost:8000", "/v1", "ftp://h/x", "http://", "http:///path", "://x", "http://user:pw@h/", "https://key@h/", "http://h/%zz"} {
		if _, err := ParseURL(s); !errors.Is(err, ErrBadUpstreamURL) {
			t.Errorf("ParseURL(%q): %v", s, err)
		}
	}
	_, err := ParseURL("http://user:pw@h/")
	if err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("user info error shows the password: %v", err)
	}
	// A refusal names the URL as docs/security.md shows an upstream URL:
	// scheme and host, "/…" for a path or query (a webhook's token).
	for _, s := range []string{"http://user:pw@h/hook/PATH_SECRET?token=Q", "ftp://h/hook/PATH_SECRET?token=Q"} {
		_, err := ParseURL(s)
		if err == nil || strings.Contains(err.Error(), "PATH_SECRET") || strings.Contains(err.Error(), "token=Q") ||
			strings.Contains(err.Error(), "user") || !strings.Contains(err.Error(), "://h/…") {
			t.Errorf("ParseURL(%q): %v, want the URL shown as its scheme and host, \"/…\" for the rest", s, err)
		}
	}
	for _, s := range []string{"http://localhost:8000/v1", "https://api.example.com", "http://[::1]:9/a?b=c"} {
		if _, err := ParseURL(s); err != nil {
			t.Errorf("ParseURL(%q): %v", s, err)
		}
	}
}

// TestParseURLWithoutScheme: an upstream URL written without its scheme,
// the usual slip (`--http 127.0.0.1:8001`, `--openai localhost:11434/v1`),
// is refused saying the scheme is missing and how to write it. The first
// was refused "the upstream URL given does not parse", nothing more.
func TestParseURLWithoutScheme(t *testing.T) {
	for _, s := range []string{"127.0.0.1:8001", "localhost:11434/v1", "[::1]:8001/", "example.com/v1"} {
		_, err := ParseURL(s)
		if !errors.Is(err, ErrBadUpstreamURL) || !strings.Contains(err.Error(), "no scheme") || !strings.Contains(err.Error(), "http://host[:port]") {
			t.Errorf("ParseURL(%q): %v, want it to say the scheme is missing, http://host[:port][/path]", s, err)
		}
	}
}

// TestClientOptions: every option refuses bad values with
// ErrInvalidOption.
func TestClientOptions(t *testing.T) {
	for name, o := range map[string]ClientOption{
		"connect 0":          WithConnectTimeout(0),
		"connect < 0":        WithConnectTimeout(-time.Second),
		"idle 0":             WithIdleTimeout(0),
		"nil transport":      WithTransport(nil),
		"empty header name":  WithCredentials(Credentials{Headers: map[string]string{"": "v"}}),
		"header with colon":  WithCredentials(Credentials{Headers: map[string]string{"X-A:": "v"}}),
		"header with CRLF":   WithCredentials(Credentials{Headers: map[string]string{"X-A\r\nB": "v"}}),
		"key and auth both":  WithCredentials(Credentials{APIKey: "k", Headers: map[string]string{"authorization": "v"}}),
		"header with spaces": WithCredentials(Credentials{Headers: map[string]string{"X A": "v"}}),
		"key header name":    WithCredentials(Credentials{APIKey: "k", KeyHeader: "X Key"}),
		"header not a token": WithCredentials(Credentials{Headers: map[string]string{"X(A)": "v"}}),
		"header with a tab":  WithCredentials(Credentials{Headers: map[string]string{"X\tA": "v"}}),
		"header not ASCII":   WithCredentials(Credentials{Headers: map[string]string{"Käse": "v"}}),
		"key header token":   WithCredentials(Credentials{APIKey: "k", KeyHeader: "X-Key;v=1"}),
		"key header twice":   WithCredentials(Credentials{APIKey: "k", KeyHeader: "X-Key", Headers: map[string]string{"x-key": "v"}}),
		"nil TLS":            WithTLSConfig(nil),
		"body bound < min":   WithMaxBodyBytes(MinAnswerBytes - 1),
	} {
		if _, err := NewClient("http://127.0.0.1:1", o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewClient("https://127.0.0.1:1", WithTransport(http.DefaultTransport), WithTLSConfig(&tls.Config{})); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("a TLS configuration with a transport of the caller's: %v", err)
	}
	c, err := NewClient("https://example.com:8443/agent?x=1", WithIdleTimeout(time.Second))
	if err != nil || c.Name() != "https://example.com:8443" || c.IdleTimeout() != time.Second || c.Base().Path != "/agent" {
		t.Fatalf("client: %v %v", c, err)
	}
}

// TestClientLocation: Location shows the base URL as docs/security.md
// shows an upstream URL: scheme and host, "/…" standing for a path or
// query (a webhook's path may be its token: .../hook/<token>), so that
// http://host and http://host/v1 still read apart in a start error or a
// warning.
func TestClientLocation(t *testing.T) {
	for base, want := range map[string]string{
		"http://127.0.0.1:8000":                      "http://127.0.0.1:8000",
		"http://127.0.0.1:8000/":                     "http://127.0.0.1:8000",
		"http://127.0.0.1:8000/v1":                   "http://127.0.0.1:8000/…",
		"https://llm.example/api/v1/?key=sekret#top": "https://llm.example/…",
		"http://h/hook/PATH_SECRET?token=t0k3n":      "http://h/…",
		"http://h/?token=t0k3n":                      "http://h/…",
	} {
		c, err := NewClient(base)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Location(); got != want {
			t.Errorf("%s: Location %q, want %q", base, got, want)
		}
	}
}

// TestClientHeaders: the upstream gets the credentials and the request's
// trace context; a redirect is not followed (credentials stay with the
// configured upstream); an error page echoing the key is scrubbed.
func TestClientHeaders(t *testing.T) {
	const key, hdr = "sk-client-test-9", "hdr-client-test-8"
	got := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
		case "/echo":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "bad credentials: %s %s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithCredentials(Credentials{APIKey: key, Headers: map[string]string{"x-api-key": hdr}}))
	if err != nil {
		t.Fatal(err)
	}
	env := &e2a.Envelope{RequestID: "r1", Trace: &e2a.TraceContext{
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "v=1"}}
	do := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		return c.Do(req, env)
	}
	resp, err := do("/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	h := <-got
	if h.Get("Authorization") != "Bearer "+key || h.Get("X-Api-Key") != hdr || h.Get("Traceparent") != env.Trace.Traceparent || h.Get("Tracestate") != "v=1" {
		t.Fatalf("upstream headers %v", h)
	}
	_, err = do("/redirect")
	var be *Error
	if !errors.As(err, &be) || be.Status != http.StatusFound || be.Code != CodeRejected {
		t.Fatalf("redirect: %v", err)
	}
	<-got
	_, err = do("/echo")
	if !errors.As(err, &be) || be.Code != CodeAuth || strings.Contains(be.Message, key) || strings.Contains(be.Message, hdr) ||
		!strings.Contains(be.Message, "[redacted]") {
		t.Fatalf("echoing 401: %v", err)
	}
	<-got
	// HTTP() sets them too, for SDKs.
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	resp, err = c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if h := <-got; h.Get("Authorization") != "Bearer "+key || h.Get("X-Api-Key") != hdr {
		t.Fatalf("HTTP() headers %v", h)
	}
}

// TestClientIdleTimeout: an answer whose headers do not come, or whose
// body stops, within the idle timeout fails with upstream_timeout; a body
// that keeps sending does not. An error answer whose body stops fails
// with its status's error at the idle timeout, not when the request's own
// context ends (agent.Run sets no deadline by default).
func TestClientIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/no-headers" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if r.URL.Path == "/error-stops" {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, "first bytes")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := NewClient(srv.URL, WithIdleTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/no-headers", nil)
	_, err = c.Do(req, nil)
	var be *Error
	if !errors.As(err, &be) || be.Code != CodeTimeout || !be.Retryable {
		t.Fatalf("no headers: %v", err)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/stops", nil)
	resp, err := c.Do(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "first bytes" || !errors.Is(err, ErrIdleTimeout) || Classify(err).(*Error).Code != CodeTimeout {
		t.Fatalf("stopped body: %q %v", b, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "POST", srv.URL+"/error-stops", nil)
	_, err = c.Do(req, nil)
	if !errors.As(err, &be) || be.Code != CodeUnavailable || !be.Retryable || be.Status != http.StatusServiceUnavailable ||
		be.Message != "upstream answered 503: first bytes" || ctx.Err() != nil {
		t.Fatalf("stopped error body: %v (the request's context: %v)", err, ctx.Err())
	}
}

// TestClientErrorBodyIdleTimeout: a non-2xx answer whose body stalls is
// read for the idle timeout exactly (fake time), then ends with the
// status's error (retryable as the status says, its Retry-After kept,
// quoting what came of the body) and the request cancelled.
func TestClientErrorBodyIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for status, want := range map[int]string{429: CodeRateLimited, 503: CodeUnavailable, 400: CodeRejected} {
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {"7"}},
					Body: &stalledBody{ctx: r.Context(), first: "overloa"}, Request: r}, nil
			})
			c, err := NewClient("http://upstream.test", WithIdleTimeout(time.Minute), WithTransport(rt))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			req, _ := http.NewRequestWithContext(ctx, "POST", "http://upstream.test/", nil)
			start := time.Now()
			_, err = c.Do(req, nil)
			var be *Error
			if !errors.As(err, &be) || be.Code != want || be.Retryable != (want != CodeRejected) || be.Status != status ||
				be.RetryAfter != 7*time.Second || be.Message != fmt.Sprintf("upstream answered %d: overloa", status) {
				t.Errorf("%d: %v", status, err)
			}
			if d := time.Since(start); d != time.Minute {
				t.Errorf("%d: Do returned after %v, want the idle timeout (1m0s)", status, d)
			}
			cancel()
		}
	})
}

// TestHTTPRefusingErrorBodyIdleTimeout: HTTPRefusing's refused answer
// (the A2A bridge's) whose error body stalls is read for the idle timeout
// (fake time), then ends with the status's error, as Do's is; its body was
// read with no bound but the call's own deadline.
func TestHTTPRefusingErrorBodyIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: &stalledBody{ctx: r.Context(), first: "overloa"}, Request: r}, nil
		})
		c, err := NewClient("http://upstream.test", WithIdleTimeout(time.Minute), WithTransport(rt))
		if err != nil {
			t.Fatal(err)
		}
		hc := c.HTTPRefusing(func(r *http.Response) bool { return r.StatusCode != http.StatusOK })
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://upstream.test/", nil)
		start := time.Now()
		_, err = hc.Do(req)
		var be *Error
		if !errors.As(err, &be) || be.Code != CodeUnavailable || be.Status != 503 || be.Message != "upstream answered 503: overloa" {
			t.Errorf("refused stalled answer: %v", err)
		}
		if d := time.Since(start); d != time.Minute {
			t.Errorf("returned after %v, want the idle timeout (1m0s)", d)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// stalledBody sends first, then nothing until ctx ends (as a transport's
// body does when its request is cancelled).
type stalledBody struct {
	ctx   context.Context
	first string
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if b.first != "" {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	<-b.ctx.Done()
	return 0, context.Cause(b.ctx)
}

func (b *stalledBody) Close() error { return nil }

// TestBodyCutShort: an upstream that aborts its answer mid-body cuts it
// short, over HTTP/1.1 (the connection closes) as over HTTP/2 (the stream
// is reset: RST_STREAM INTERNAL_ERROR): both are upstream_unavailable,
// retryable, as docs/agents.md says of an answer cut short. A body the
// transport cannot decompress is the upstream's garbage, not a cut:
// upstream_protocol_error.
func TestBodyCutShort(t *testing.T) {
	const first = "data: {\"choices\":[]}\n\n"
	for _, h2 := range []bool{false, true} {
		read := make(chan struct{})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/gzip" {
				w.Header().Set("Content-Encoding", "gzip")
				_, _ = io.WriteString(w, "not gzip at all")
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, first)
			w.(http.Flusher).Flush()
			select { // the client has the first bytes
			case <-read:
			case <-r.Context().Done():
			}
			panic(http.ErrAbortHandler) // the upstream gives up on this answer
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		c, err := NewClient(srv.URL, WithTransport(srv.Client().Transport))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", srv.URL, nil)
		resp, err := c.Do(req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
			t.Fatalf("answered over %s, want HTTP/%d", resp.Proto, want)
		}
		b := make([]byte, len(first))
		if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != first {
			t.Fatalf("%s: first bytes %q, %v", resp.Proto, b, err)
		}
		close(read)
		_, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var be *Error
		if !errors.As(Classify(err), &be) || be.Code != CodeUnavailable || !be.Retryable {
			t.Errorf("%s: the body's error %v is %v, want %s retryable", resp.Proto, err, Classify(err), CodeUnavailable)
		}

		req, _ = http.NewRequest("POST", srv.URL+"/gzip", nil)
		if resp, err = c.Do(req, nil); err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !errors.As(Classify(err), &be) || be.Code != CodeProtocol || be.Retryable {
			t.Errorf("%s: a body that does not decompress: %v is %v, want %s", resp.Proto, err, Classify(err), CodeProtocol)
		}
		srv.Close()
	}
}

// TestIdleBodyTimer: the idle timer restarts at every read that returns
// bytes, and fires only after a silence of the idle timeout (fake time).
func TestIdleBodyTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		var cause error
		b := newIdleBody(pr, time.Second, func(err error) {
			cause = err
			_ = pr.CloseWithError(err)
		})
		defer b.Close()
		go func() {
			for range 5 {
				time.Sleep(900 * time.Millisecond) // fake time: under the idle timeout each
				_, _ = pw.Write([]byte("x"))
			}
			// then silence
		}()
		start := time.Now()
		buf := make([]byte, 8)
		n := 0
		var err error
		for err == nil {
			var k int
			k, err = b.Read(buf)
			n += k
		}
		if n != 5 || !errors.Is(err, ErrIdleTimeout) || !errors.Is(cause, ErrIdleTimeout) {
			t.Fatalf("read %d bytes, %v (cause %v)", n, err, cause)
		}
		if d := time.Since(start); d != 5*900*time.Millisecond+time.Second {
			t.Fatalf("timed out after %v", d)
		}
	})
}

// TestUnreachable: a refused connection is upstream_unreachable,
// retryable.
func TestUnreachable(t *testing.T) {
	port := natstest.FreePorts(t, 1)[0]
	c, err := NewClient(fmt.Sprintf("http://127.0.0.1:%d/", port), WithConnectTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", c.Base().String()+"hook/tok-1?key=sk-1", strings.NewReader("{}"))
	_, err = c.Do(req, nil)
	var be *Error
	if !errors.As(err, &be) || be.Code != CodeUnreachable || !be.Retryable {
		t.Fatalf("refused: %v", err)
	}
	// Do calls the transport itself: its failure reads as http.Client's
	// (a *url.Error naming the method and the URL), which the message
	// names by scheme and host only.
	req, _ = http.NewRequest("POST", c.Base().String()+"hook/tok-1?key=sk-1", strings.NewReader("{}"))
	_, cerr := (&http.Client{Transport: http.DefaultTransport}).Do(req)
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Op != "Post" {
		t.Fatalf("Do's failure is not Client.Do's *url.Error: %#v", err)
	}
	if want := Classify(cerr).Error(); be.Error() != want {
		t.Fatalf("Do's failure reads\n%q, http.Client's\n%q", be.Error(), want)
	}
	if strings.Contains(be.Error(), "tok-1") || strings.Contains(be.Error(), "sk-1") {
		t.Fatalf("the message shows the URL's path or query: %q", be.Error())
	}
}

// TestHTTP2ResetBeforeHeadersRetryable: an HTTP/2 upstream (or the
// proxy in front of it: envoy, nginx, a load balancer draining) that resets
// the call's stream before any header came (RST_STREAM INTERNAL_ERROR) cut
// the answer short before anything was written: like a reset HTTP/1.1
// connection (ECONNRESET) it is upstream_unavailable, retryable, so that
// the Handler retries it. It is classified upstream_protocol_error, not
// retryable, and the request fails at once.
func TestHTTP2ResetBeforeHeadersRetryable(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler) // HTTP/2: RST_STREAM INTERNAL_ERROR, no headers
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	defer srv.Close()
	c, err := NewClient(srv.URL, WithTransport(srv.Client().Transport), WithIdleTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
	resp, err := c.Do(req, nil)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the reset call succeeded")
	}
	var be *Error
	if !errors.As(err, &be) {
		t.Fatalf("error %T %v, want a *bridge.Error", err, err)
	}
	if be.Code != CodeUnavailable || !be.Retryable {
		t.Errorf("a stream reset before the headers: %s retryable=%v (%v), want %s retryable", be.Code, be.Retryable, err, CodeUnavailable)
	}
}

// TestPermanentServerErrorsNotRetryable: 501 Not Implemented (what
// llama.cpp's server answers a feature it lacks: not_supported_error) and
// 505 HTTP Version Not Supported say the upstream will never serve the
// call: retrying it cannot help. They are upstream_unavailable with
// retryable true (every status ≥ 500 is), so the bridge re-runs the call
// its retries' number of times and then tells the client to retry too.
func TestPermanentServerErrorsNotRetryable(t *testing.T) {
	for _, status := range []int{http.StatusNotImplemented, http.StatusHTTPVersionNotSupported} {
		rec := httptest.NewRecorder()
		http.Error(rec, `{"error":{"code":501,"message":"tools are not supported","type":"not_supported_error"}}`, status)
		e := FromResponse(rec.Result())
		if e.Retryable {
			t.Errorf("HTTP %d: %s retryable=%v, want not retryable", status, e.Code, e.Retryable)
		}
	}
}

// TestHeaderWaitBoundedWithTransport: WithIdleTimeout "bounds the
// wait for the answer's headers"; with WithTransport (a proxy's
// transport, which its doc says costs only the connect timeout) nothing
// bounds it: an upstream that accepts the call and never answers holds
// it until the caller's own deadline, not the idle timeout.
func TestHeaderWaitBoundedWithTransport(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := NewClient(srv.URL, WithTransport(&http.Transport{}), WithIdleTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
	resp, err := c.Do(req, nil)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a call never answered succeeded")
	}
	if ctx.Err() != nil {
		t.Errorf("the call ended at the caller's deadline (%v), not at the 50ms idle timeout", err)
	}
}

// TestClientWithKeyHeader: WithKeyHeader moves the API key into a header
// of its own, as it is, on a copy (the client it was called on still
// sends a bearer token); a client without a key, or whose headers set
// that header, is returned as it is; a name that is no header name is
// refused.
func TestClientWithKeyHeader(t *testing.T) {
	c, err := NewClient("http://127.0.0.1:1", WithCredentials(Credentials{APIKey: "sk-k1"}))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := c.WithKeyHeader("X-Agent-Key")
	if err != nil || moved == c {
		t.Fatalf("WithKeyHeader: %v, %v", moved, err)
	}
	for _, x := range []struct {
		c         *Client
		key, auth string
	}{{moved, "sk-k1", ""}, {c, "", "Bearer sk-k1"}} {
		h := http.Header{}
		x.c.SetHeaders(context.Background(), h, nil)
		if h.Get("X-Agent-Key") != x.key || h.Get("Authorization") != x.auth {
			t.Errorf("headers %v, want X-Agent-Key %q and Authorization %q", h, x.key, x.auth)
		}
	}
	for _, name := range []string{"X Key", "X-Key;v=1", "\"X-Key\"", "Schlüssel"} {
		if _, err := c.WithKeyHeader(name); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("a key header %q (no RFC 9110 token): %v", name, err)
		}
	}
	none, _ := NewClient("http://127.0.0.1:1")
	own, _ := NewClient("http://127.0.0.1:1", WithCredentials(Credentials{APIKey: "sk-k1", Headers: map[string]string{"x-agent-key": "v"}}))
	for _, x := range []*Client{none, own} {
		if got, err := x.WithKeyHeader("X-Agent-Key"); got != x || err != nil {
			t.Errorf("WithKeyHeader of %s: %p, %v; want the client itself", x.creds, got, err)
		}
	}
}

// TestProbeBodyNotBounded: Do reads an answer typed JSON up to the body
// bound (WithMaxBodyBytes, an answer's), but the body Probe gives its
// reader is whole: e2a agent reads an OpenAI server's model list (some
// MB on OpenRouter) with a bound of its own, whatever
// E2A_UPSTREAM_MAX_ANSWER_BYTES says.
func TestProbeBodyNotBounded(t *testing.T) {
	list := `{"object":"list","data":[` + strings.Repeat(`{"id":"m"},`, 1000) + `{"id":"m"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, list)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithMaxBodyBytes(MinAnswerBytes))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	var rerr error
	if _, err := c.Probe(context.Background(), "models", func(r io.Reader) { n, rerr = io.Copy(io.Discard, r) }); err != nil {
		t.Fatal(err)
	}
	if n != int64(len(list)) || rerr != nil {
		t.Fatalf("Probe's reader read %d bytes (%v) of a model list of %d", n, rerr, len(list))
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); !errors.Is(err, ErrAnswerTooLarge) {
		t.Fatalf("Do's answer of %d bytes read past a bound of %d: %v", len(list), MinAnswerBytes, err)
	}
}

// TestEventBound: an event stream's body on the SDKs' clients is read
// while each event (the bytes from a blank line to the next) stays within
// the body bound; an event one byte over it fails with ErrAnswerTooLarge,
// upstream_protocol_error, not retryable, however the bytes are split
// across reads. A blank line is an empty one or a carriage return alone
// before its line feed, as a2a-go reads them; a lone carriage return ends
// no line there, so it ends no event here.
func TestEventBound(t *testing.T) {
	const max = MinAnswerBytes
	// event is an event of n bytes (n ≥ 8): data lines and a comment,
	// each ending in a line feed.
	event := func(n int) string {
		first := "data: " + strings.Repeat("x", n/2-7) + "\n"
		rest := n - len(first)
		return first + ": c\n" + "data: " + strings.Repeat("y", rest-11) + "\n"
	}
	if len(event(max)) != max {
		t.Fatalf("event(%d) is %d bytes", max, len(event(max)))
	}
	for _, c := range []struct {
		name, body string
		over       bool
	}{
		{"events at the bound", strings.Repeat(event(max)+"\n", 8), false},
		{"CRLF blank lines", strings.Repeat(event(max)+"\r\n", 8), false},
		{"one byte over", event(max) + "\n" + event(max+1) + "\n", true},
		{"no blank line", strings.Repeat(event(max/4), 5), true},
		{"lone CRs end no event", strings.Repeat(event(max/4)+"\r\r", 5), true},
		{"a blank line of two CRs is none", strings.Repeat(event(max/4)+"\r\r\n", 5), true},
	} {
		for _, split := range []bool{false, true} {
			var r io.Reader = strings.NewReader(c.body)
			if split {
				r = iotest.OneByteReader(r)
			}
			n, err := io.Copy(io.Discard, &eventBound{rc: io.NopCloser(r), max: max})
			var be *Error
			switch {
			case !c.over && (err != nil || n != int64(len(c.body))):
				t.Errorf("%s (one byte a read: %v): read %d of %d bytes: %v", c.name, split, n, len(c.body), err)
			case c.over && (!errors.Is(err, ErrAnswerTooLarge) || !errors.As(err, &be) || be.Code != CodeProtocol || be.Retryable):
				t.Errorf("%s (one byte a read: %v): %v, want upstream_protocol_error wrapping ErrAnswerTooLarge", c.name, split, err)
			}
		}
	}
}

// TestSwitchingProtocolsAnswer: an upstream that answers 101 Switching
// Protocols (which the bridge never asks for) and then holds its
// connection ends the call at once with the status's error,
// upstream_rejected, not retryable, on Do and on the SDKs' clients, and
// its connection is closed. net/http makes a 101's body the raw
// connection, which neither the call's context nor the idle timeout ends:
// the read of it (the error page Do quotes) waited as long as the
// upstream held the connection, the request and its in-flight slot with
// it, past the idle timeout (300 ms here), until the request's deadline.
func TestSwitchingProtocolsAnswer(t *testing.T) {
	closed := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		testkit.SwitchProtocols(w) // until the bridge closes the connection
		closed <- struct{}{}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithIdleTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	refusing := c.HTTPRefusing(func(r *http.Response) bool { return r.StatusCode != http.StatusOK })
	for name, call := range map[string]func(*http.Request) (*http.Response, error){
		"Do":           func(r *http.Request) (*http.Response, error) { return c.Do(r, nil) },
		"HTTPRefusing": refusing.Do,
	} {
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
			resp, err := call(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			done <- err
		}()
		err := testkit.Receive(t, done, 10*time.Second, "%s: the call still reads the 101's connection", name)
		var be *Error
		if !errors.As(err, &be) || be.Status != http.StatusSwitchingProtocols || be.Code != CodeRejected || be.Retryable {
			t.Errorf("%s: %v, want upstream_rejected (HTTP 101), not retryable", name, err)
		}
		testkit.Receive(t, closed, 10*time.Second, "%s: the 101's connection is still open", name)
	}
	// An SDK's client gets the 101 without a body to wait on.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); read <- err }()
	if err := testkit.Receive(t, read, 10*time.Second, "HTTP: the SDK's read of the 101's body still waits"); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Errorf("HTTP: %d, read %v; want 101, an empty body", resp.StatusCode, err)
	}
	_ = resp.Body.Close()
	testkit.Receive(t, closed, 10*time.Second, "HTTP: the 101's connection is still open")
}

package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/outbound"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
)

var errUnexpectedEOF = io.ErrUnexpectedEOF

func isConnError(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe") ||
		strings.Contains(s, "server closed idle connection") || strings.Contains(s, "connection refused")
}

// forbiddenHeaders may not be set by a workflow: they would change how the
// request is framed or routed.
var forbiddenHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true, "upgrade": true,
	"te": true, "trailer": true, "keep-alive": true, "proxy-authorization": true, "proxy-connection": true,
}

// newTransport returns the HTTP transport of ApiCall: no proxy from the
// environment, and a dialer that resolves the host itself, checks every
// address with Policy.CheckAddr and connects only to a checked address, so
// a name cannot resolve to a private address between check and use. TLS
// still verifies the certificate against the URL's host name.
func (e *Executor) newTransport() *http.Transport {
	pol := e.policy()
	var res outbound.Resolver
	if e.opts.Resolver != nil {
		res = e.opts.Resolver
	}
	return outbound.Transport(outbound.Config{
		Resolver:               res,
		CheckFor:               func(string, string) outbound.Check { return pol.CheckAddr },
		DialTimeout:            e.opts.DialTimeout,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    16,
		MaxResponseHeaderBytes: 64 << 10,
	})
}

// escapeURLPart escapes a referenced value for its place in the url: a
// path segment (no "/"; "." or ".." is sent as %2E or %2E%2E, which the
// policy then refuses as a dot segment) or a query value.
func escapeURLPart(before, value string) string {
	if strings.ContainsAny(before, "?#") {
		return url.QueryEscape(value)
	}
	switch value {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(value)
}

// apiFailure is a non-2xx answer, with a redacted snippet of its body.
type apiFailure struct {
	httpStatusError
	snippet string
}

type preparedCall struct {
	method    string
	u         *url.URL
	headers   http.Header
	body      []byte
	credNames []string
	timeout   time.Duration
}

func (x *execution) apiCall(ctx context.Context, op *Operation, step int, iter *int) (any, bool, error) {
	a := op.ApiCall
	refs := x.references()
	raw, err := a.URL.render(refs, escapeURLPart)
	if err != nil {
		return nil, false, err
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, false, dataError("the resolved url is invalid")
	}
	if perr := x.e.policy().checkRequest(x.principal, a.Method, u, true); perr != nil {
		return nil, false, perr
	}
	pc := &preparedCall{method: a.Method, u: u, headers: http.Header{}, timeout: a.Timeout}
	if pc.timeout == 0 {
		pc.timeout = x.e.limits.DefaultTimeout
	}
	plain := map[string]string{}
	creds := map[string]string{}
	for name, hv := range a.Headers {
		if forbiddenHeaders[strings.ToLower(name)] {
			return nil, false, permissionError("header %s may not be set by a workflow", name)
		}
		if hv.CredentialID != "" {
			val, perr := x.e.opts.Vault.resolve(x.principal, hv.CredentialID, u)
			if perr != nil {
				return nil, false, perr
			}
			x.red.add(val)
			x.red.add(hv.Prefix + val)
			pc.headers.Set(name, hv.Prefix+val)
			pc.credNames = append(pc.credNames, name)
			// The prefix is part of the header sent: two calls that
			// differ in it are two calls (the cache answered the second
			// with the first's response).
			creds[http.CanonicalHeaderKey(name)] = hv.CredentialID + "\x00" + hv.Prefix
			continue
		}
		s, err := hv.Value.render(refs, nil)
		if err != nil {
			return nil, false, err
		}
		if !httpguts.ValidHeaderFieldValue(s) {
			return nil, false, dataError("header %s resolves to a value with a line break or control character", name)
		}
		pc.headers.Set(name, s)
		plain[http.CanonicalHeaderKey(name)] = s
	}
	if a.HasBody {
		bv, err := resolveValue(a.Body, refs)
		if err != nil {
			return nil, false, err
		}
		ct := pc.headers.Get("Content-Type")
		if s, ok := bv.(string); ok && ct != "" && !strings.Contains(ct, "json") {
			pc.body = []byte(s)
		} else {
			pc.body, err = json.Marshal(bv)
			if err != nil {
				return nil, false, dataError("the body does not encode as JSON: %v", err)
			}
			if ct == "" {
				pc.headers.Set("Content-Type", "application/json")
			}
		}
	}
	if pc.headers.Get("Accept") == "" {
		pc.headers.Set("Accept", "application/json, */*;q=0.5")
	}
	pc.headers.Set("User-Agent", "e2a-workflow/1.0")

	host, port := normHost(u)
	tag := "api|" + x.principal + "|" + net.JoinHostPort(host, port)
	cacheable := a.Method == http.MethodGet && CacheTTL[OpApiCall] > 0
	key := hashKey(OpApiCall, x.principal, a.Method, u.String(), plain, creds, string(pc.body))
	if cacheable {
		if v, ok, err := x.e.cache.Get(ctx, key); err == nil && ok {
			return v, true, nil
		} else if err != nil {
			x.e.log.Warn("workflow: cache get failed", "err", err)
		}
	}
	res, err := x.withRetry(ctx, op, step, iter, pc)
	if cacheable {
		if err == nil {
			if serr := x.e.cache.Set(ctx, key, tag, res, CacheTTL[OpApiCall]); serr != nil {
				x.e.log.Warn("workflow: cache set failed", "err", serr)
			}
		}
	} else if ierr := x.e.cache.Invalidate(ctx, tag); ierr != nil {
		// a write (even a failed one may have changed the server) invalidates
		// the principal's cached reads of that host
		x.e.log.Warn("workflow: cache invalidate failed", "err", ierr)
	}
	return res, false, err
}

// callContext bounds one attempt of pc by its timeout, or by what
// maxExecutionTime leaves when that is shorter (cut).
func (x *execution) callContext(ctx context.Context, pc *preparedCall) (_ context.Context, _ context.CancelFunc, cut bool) {
	timeout := pc.timeout
	if r := x.remaining(); r < timeout {
		timeout, cut = r, true
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	return actx, cancel, cut
}

// budgetSpent is err, an attempt's failure, as errBudgetSpent when the
// attempt, cut to what maxExecutionTime left, timed out: at the
// execution's end, not after the operation's timeout (raising that would
// not help).
func budgetSpent(actx context.Context, err error, cut bool) error {
	if err != nil && cut && errors.Is(actx.Err(), context.DeadlineExceeded) && (errors.Is(err, context.DeadlineExceeded) || isTimeout(err)) {
		return errBudgetSpent
	}
	return err
}

// errBudgetSpent is an attempt that timed out when the execution's
// maxExecutionTime, shorter than the operation's timeout, ran out: the
// execution's TimeoutError, not the call's (which named the operation's
// timeout, 30 s, for a call the budget had cut to one).
var errBudgetSpent = errors.New("workflow: the execution's time ran out during the call")

func (x *execution) withRetry(ctx context.Context, op *Operation, step int, iter *int, pc *preparedCall) (any, error) {
	pol := x.e.retry
	for attempt := 0; ; attempt++ {
		res, err := x.attempt(ctx, pc)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, x.ctxError(ctx, op.ID)
		}
		if errors.Is(err, errBudgetSpent) {
			return nil, x.timeout(op.ID, 0, "the execution exceeded maxExecutionTime (%v)", x.deadline.Sub(x.started))
		}
		retry := classify(err, ctx)
		we := x.apiError(err, pc)
		we.Retryable = retry
		if !retry || pol.MaxRetries < 0 || attempt >= pol.MaxRetries {
			if attempt > 0 {
				we.withDetail("attempts", attempt+1)
			}
			return nil, we
		}
		delay := pol.Delay(attempt)
		if ra := we.RetryAfter; ra > 0 {
			if ra > pol.MaxDelay {
				we.withDetail("attempts", attempt+1).withDetail("retry_after_s", int64(ra.Seconds()))
				return nil, we
			}
			if ra > delay {
				delay = ra
			}
		}
		if delay >= x.remaining() {
			we.withDetail("attempts", attempt+1)
			we.Suggestions = append(we.Suggestions, "maxExecutionTime leaves no time for another retry")
			return nil, we
		}
		if err := x.emit(ctx, Event{Phase: PhaseRetry, OperationID: op.ID, Type: op.Type, Step: step, Iteration: iter,
			Attempt: attempt + 1, DelayMs: delay.Milliseconds(), Error: we}); err != nil {
			return nil, err
		}
		if err := x.e.clock.Sleep(ctx, delay); err != nil {
			return nil, x.ctxError(ctx, op.ID)
		}
	}
}

// attempt sends the request once.
func (x *execution) attempt(ctx context.Context, pc *preparedCall) (_ any, err error) {
	ok, ra, err := x.e.limiter.AllowCall(ctx, x.principal)
	if err != nil {
		e := newError(ExecutionError, "the API call limiter is unavailable")
		e.Retryable = true
		return nil, e
	}
	if !ok {
		e := newError(ExecutionError, "API call rate limit exceeded for this agent")
		e.Retryable, e.RetryAfter = true, ra
		e.withDetail("retry_after_s", int64(ra.Seconds()+0.999))
		e.Suggestions = []string{"Make fewer API calls per minute or hour"}
		return nil, e
	}
	actx, cancel, cut := x.callContext(ctx, pc)
	defer cancel()
	defer func() { err = budgetSpent(actx, err, cut) }()
	var body io.Reader
	if pc.body != nil {
		body = bytes.NewReader(pc.body)
	}
	req, err := http.NewRequestWithContext(actx, pc.method, pc.u.String(), body)
	if err != nil {
		return nil, dataError("the request cannot be built: %v", err)
	}
	req.Header = pc.headers.Clone()
	sctx, span := tracing.StartClientSpan(actx, tracerName, req)
	req = req.WithContext(sctx)
	setTrace(sctx, req.Header)
	origHost, origScheme := pc.u.Host, pc.u.Scheme
	client := &http.Client{
		Transport: x.e.transport,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return newError(ExecutionError, "stopped after 5 redirects")
			}
			if perr := x.e.policy().checkRequest(x.principal, r.Method, r.URL, true); perr != nil {
				perr.Message = "redirect refused: " + perr.Message
				return perr
			}
			// Credentials go only where they were sent first: the same
			// host and port over the same scheme (an https → http
			// redirect would send them in clear, CVE-2022-27776).
			if !strings.EqualFold(r.URL.Host, origHost) || !strings.EqualFold(r.URL.Scheme, origScheme) {
				for _, h := range pc.credNames {
					r.Header.Del(h)
				}
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	tracing.EndClientSpan(span, resp, err, x.red.text)
	if err != nil {
		return nil, err
	}
	return x.answer(actx, resp)
}

// answer reads resp, the answer to an attempt whose context is actx: its
// value, or the attempt's failure.
func (x *execution) answer(actx context.Context, resp *http.Response) (any, error) {
	defer resp.Body.Close()
	// The answer's read ends with the call's timeout too: net/http ends
	// it with actx for every answer but a 101 Switching Protocols, whose
	// body is the raw connection, read for ever from an API that then
	// sends nothing.
	defer context.AfterFunc(actx, func() { _ = resp.Body.Close() })()
	max := x.e.limits.MaxResponseBytes
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		if cerr := actx.Err(); cerr != nil {
			return nil, cerr // cut by the timeout (or the execution's end), not the API
		}
		return nil, err
	}
	// A non-2xx answer is judged by its status (spec §10: 5xx, 408 and 429
	// are retryable) before its size: only a snippet of its body is kept,
	// so an error page larger than MaxResponseBytes is no DataError.
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snip := string(x.red.bytes(data))
		if len(snip) > 1024 {
			snip = strings.ToValidUTF8(snip[:1024], "") + "…" // no character cut in two
		}
		return nil, &apiFailure{httpStatusError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), x.e.clock.Now())}, snip}
	}
	if int64(len(data)) > max {
		e := dataError("the response is larger than %d bytes", max)
		e.Suggestions = []string{"Request less data (pagination, filters) from the API"}
		return nil, e
	}
	data = x.red.bytes(data)
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	ct := resp.Header.Get("Content-Type")
	trim := bytes.TrimSpace(data)
	if strings.Contains(ct, "json") || trim[0] == '{' || trim[0] == '[' {
		v, err := decodeJSON(data)
		if err == nil {
			return v, nil
		}
		if strings.Contains(ct, "json") {
			return nil, dataError("the response is not valid JSON: %v", err)
		}
	}
	return string(data), nil
}

func (e *apiFailure) Unwrap() error { return &e.httpStatusError }

// apiError turns a failed attempt into the spec's error.
func (x *execution) apiError(err error, pc *preparedCall) *Error {
	var we *Error
	if errors.As(err, &we) {
		c := *we
		return &c
	}
	var af *apiFailure
	if errors.As(err, &af) {
		e := newError(ExecutionError, "API call failed with HTTP %d", af.status)
		e.RetryAfter = af.retryAfter
		e.withDetail("statusCode", af.status).withDetail("response", af.snippet)
		switch {
		case af.status == 401 || af.status == 403:
			e.Suggestions = []string{"Verify credentials are valid", "Check that the agent may use this API"}
		case af.status == 404:
			e.Suggestions = []string{"Check the URL and the values it references"}
		case af.status == 429:
			e.Suggestions = []string{"The API is rate limiting; retry later"}
		case af.status >= 500:
			e.Suggestions = []string{"Check API endpoint availability", "Verify credentials are valid"}
		default:
			e.Suggestions = []string{"Check the request method, headers and body"}
		}
		if af.retryAfter > 0 {
			e.withDetail("retry_after_s", int64(af.retryAfter.Seconds()))
		}
		return e
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		e := newError(TimeoutError, "API call to %s timed out after %v", pc.u.Host, pc.timeout)
		e.Suggestions = []string{"Raise the operation's timeout or check the API's latency"}
		return e
	}
	e := newError(ExecutionError, "API call to %s failed: %s", pc.u.Host, x.red.text(err.Error()))
	e.Suggestions = []string{"Check API endpoint availability"}
	return e
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

const tracerName = "github.com/e2a-pipeline/pipeline/workflow"

// setTrace sets the W3C trace context of an ApiCall on h, unless the
// workflow set a traceparent of its own: the context of the call's span
// when tracing is on (its parent the worker's process span), else the
// execution request's own (agent.TraceFrom, as the client sent it), so the
// API called joins the request's trace either way, as a bridge's upstream
// does. Only a valid context is sent (e2a.CleanTrace).
func setTrace(ctx context.Context, h http.Header) {
	if h.Get("traceparent") != "" {
		return
	}
	tc := tracing.Inject(ctx)
	if tc == nil {
		if t, ok := agent.TraceFrom(ctx); ok {
			tc = e2a.CleanTrace(&t)
		}
	}
	if tc == nil {
		return
	}
	h.Set("traceparent", tc.Traceparent)
	if tc.Tracestate != "" {
		h.Set("tracestate", tc.Tracestate)
	}
}

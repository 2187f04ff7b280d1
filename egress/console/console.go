package console

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

//go:embed assets
var assetFS embed.FS

// Console serves the web console. Create it with [New]; mount it with
// [Console.Register]; stop its indexer with [Console.Close].
type Console struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	o      options
	list   *lister
	stats  *statsSource
	egress http.Handler
	svc    *egress.Service // nil without egress
	assets http.Handler
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// AuthFunc authenticates a console request from its credential headers
// (X-Api-Key, or Authorization: Bearer), the same way as every other
// endpoint. It returns the principal as the ownership rule sees it, or an
// error with the HTTP status to answer (401, 403, or 429 for a client over a
// failure limit; 0 means 401). What a client reads of the error
// (egress.ClientMessage) is shown to the user: it must not contain the
// credential; a 429 says when to retry instead. A signed-in
// principal sees only its own requests unless it has the audit or admin
// role (package tenant).
type AuthFunc func(r *http.Request) (p tenant.Principal, status int, err error)

type options struct {
	auth      AuthFunc
	challenge func(h http.Header, err error)
	reg       prometheus.Registerer
	gatherer  prometheus.Gatherer
	log       *slog.Logger
	streams   streams.Config
	ttl       time.Duration
	noIndexer bool
	demo      http.Handler
	demoPool  string
	budget    int
	push      PushView
	// publishTimeout bounds the wait for an index publish's ack
	// (indexPublishTimeout when 0).
	publishTimeout time.Duration
}

// Option configures a Console. Options validate their arguments: New
// returns an error wrapping ErrInvalidOption for a bad one.
type Option func(*options) error

// WithAuth requires every page and API of the console to authenticate with
// fn (default: none, as when ingress runs without auth; nil is refused).
func WithAuth(fn AuthFunc) Option {
	return option.Check(ErrInvalidOption, fn != nil, func(o *options) { o.auth = fn }, "nil auth func")
}

// WithChallenge sets the WWW-Authenticate challenges of a 401 the console
// answers (RFC 9110 §15.5.2), as the front door's (ingress.Auth's
// SetChallenge): fn adds them to h for the authentication error err (nil
// is refused). Without it a 401 names none.
func WithChallenge(fn func(h http.Header, err error)) Option {
	return option.Check(ErrInvalidOption, fn != nil, func(o *options) { o.challenge = fn }, "nil challenge func")
}

// WithRegisterer registers the console's metrics (e2a_console_*) on reg
// (nil is refused).
func WithRegisterer(reg prometheus.Registerer) Option {
	return option.NotNil(ErrInvalidOption, "registerer", reg, func(o *options) { o.reg = reg })
}

// WithGatherer is the registry the live counters are read from: the
// process's one registry (default: none, only stream state is shown; nil
// is refused).
func WithGatherer(g prometheus.Gatherer) Option {
	return option.NotNil(ErrInvalidOption, "gatherer", g, func(o *options) { o.gatherer = g })
}

// WithLogger sets the logger (default slog.Default(); nil is refused).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(o *options) { o.log = l })
}

// WithStreamsConfig sizes the index bucket from the pipeline's streams
// configuration: its replicas, storage, and (unless WithIndexTTL) its key
// TTL, ResponsesMaxAge. A configuration that fails c.Validate is refused.
func WithStreamsConfig(c streams.Config) Option {
	err := c.Validate()
	return option.Check(ErrInvalidOption, err == nil, func(o *options) { o.streams = c }, "streams config: %v", err)
}

// WithIndexTTL sets how long index keys live (see doc.go for sizing;
// d ≤ 0 is refused).
func WithIndexTTL(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0, func(o *options) { o.ttl = d }, "index TTL %v ≤ 0", d)
}

// WithoutIndexer serves the console from the index without feeding it
// (another process runs the indexer).
func WithoutIndexer() Option { return func(o *options) error { o.noIndexer = true; return nil } }

// WithDemo shows a "start a demo request" form. The console publishes
// nothing itself: it hands POST /v1/requests?agent=pool, with the caller's
// credential, to h (the ingress mux). A nil h or an invalid pool name
// (subjects.ValidatePool) is refused.
func WithDemo(h http.Handler, pool string) Option {
	return func(o *options) error {
		if h == nil {
			return invalid("nil demo handler")
		}
		if err := subjects.ValidatePool(pool); err != nil {
			return invalid("demo pool: %v", err)
		}
		o.demo, o.demoPool = h, pool
		return nil
	}
}

// WithScanBudget bounds the index keys one list call examines (default
// DefaultScanBudget; n < 1 is refused).
func WithScanBudget(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1, func(o *options) { o.budget = n }, "scan budget %d < 1", n)
}

// New provisions the index stream (idempotently), starts the indexer
// (unless WithoutIndexer) and returns the console. eg serves the frames of
// a request (its GET /v1/requests/{id}/stream endpoint is mounted under
// the console's auth). The indexer stops when ctx ends or on Close.
func New(ctx context.Context, nc *nats.Conn, eg *egress.Service, opts ...Option) (*Console, error) {
	o := options{streams: streams.DefaultConfig(), budget: DefaultScanBudget}
	if err := option.Apply(ErrInvalidOption, &o, opts); err != nil {
		return nil, err
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.budget <= 0 {
		o.budget = DefaultScanBudget
	}
	// A publish of the indexer whose ack never comes (the server that took
	// it lost it) fails after publishTimeout instead of holding the index
	// for good; the indexer then publishes the batch again.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cmp.Or(o.publishTimeout, indexPublishTimeout)))
	if err != nil {
		return nil, err
	}
	icfg := IndexStreamConfig(o.streams, o.ttl)
	actx, acancel := context.WithTimeout(ctx, 15*time.Second)
	defer acancel()
	if err := ensureIndex(actx, js, icfg); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	c := &Console{nc: nc, js: js, o: o, done: make(chan struct{}),
		list: &lister{nc: nc, js: js, budget: o.budget},
		stats: &statsSource{gatherer: o.gatherer, js: js, index: !o.noIndexer, minInterval: 500 * time.Millisecond,
			presence: streams.NewPresence(0)},
		assets: http.StripPrefix("/console/assets/", http.FileServerFS(sub)),
	}
	if eg != nil {
		m := http.NewServeMux()
		eg.Register(m)
		c.egress, c.svc = m, eg
		c.list.agedOut = func(ctx context.Context, id, pool string, seq uint64) bool {
			ok, _ := eg.AnswerAgedOut(ctx, id, pool, seq) // an error: nothing tells, pending
			return ok
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	if o.noIndexer {
		close(c.done)
		return c, nil
	}
	indexed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mConsoleIndexed,
		Help: "Messages of E2A_REQUESTS read into the console index (consumer: requests, the indexer's one consumer)."}, []string{"consumer"})
	ixErrors := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mConsoleErrors,
		Help: "Console index fetches or updates that failed (the index is best effort)."}, []string{"consumer"})
	if o.reg != nil {
		for _, col := range []prometheus.Collector{indexed, ixErrors} {
			if err := o.reg.Register(col); err != nil {
				cancel()
				return nil, err
			}
		}
	}
	ix := &indexer{js: js, ttl: icfg.MaxAge, log: o.log, indexed: indexed, errors: ixErrors}
	ready := make(chan error, 1)
	go func() {
		defer close(c.done)
		ix.run(rctx, ready)
	}()
	select {
	case err := <-ready:
		if err != nil {
			cancel()
			<-c.done
			return nil, err
		}
	case <-ctx.Done():
		cancel()
		<-c.done
		return nil, ctx.Err()
	}
	return c, nil
}

// Close stops the indexer and waits for it.
func (c *Console) Close() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}

// Register mounts the console on mux:
//
//	GET  /console                              the page (a login form when auth is required and missing)
//	GET  /console/login                        the login form (a visitor of optional auth, the anonymous
//	                                           principal, is served the page, and offered this form)
//	GET  /console/assets/...                   its script and style sheet
//	GET  /console/api/session                  who is signed in, what the page may offer
//	POST /console/api/login, /console/api/logout
//	GET  /console/api/requests                 paged list: request_id, task, session, context, user,
//	                                           status, since, until, before, limit
//	GET  /console/api/requests/{id}            index entry, envelope (secrets removed), replay command
//	GET  /console/api/requests/{id}/stream     egress's E2A SSE (Last-Event-ID, ?from=) under console auth
//	GET  /console/api/request?id=, /console/api/request/stream?id=
//	                                           the same two, the id in the query: how the page asks for
//	                                           the request "." or ".." (a browser resolves such a path
//	                                           segment, escaped too, as a dot segment)
//	GET  /console/api/stats                    per-stage counters, consumers, streams
//	GET  /console/api/tasks/{task}/push        a task's push configs and their delivery state (WithPushView)
//	GET  /console/api/task/push?id=            the same, the task in the query (the task "." or "..")
//	POST /console/api/demo                     start a demo request through ingress (WithDemo)
//
// Another method on any of these paths is 405 with Allow (GET and HEAD
// where GET is served); a path under /console naming none of them is 404.
func (c *Console) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /console", c.page)
	mux.HandleFunc("GET /console/{$}", c.page)
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.Handle("GET /console/assets/", withSecurityHeaders(c.assets))
	mux.HandleFunc("GET /console/api/session", c.gate(c.session))
	mux.HandleFunc("POST /console/api/login", c.login)
	mux.HandleFunc("POST /console/api/logout", c.logout)
	mux.HandleFunc("GET /console/api/requests", c.gate(c.listRequests))
	mux.HandleFunc("GET /console/api/requests/{id}", c.gate(c.getRequest))
	mux.HandleFunc("GET /console/api/requests/{id}/stream", c.gate(c.streamRequest))
	mux.HandleFunc("GET /console/api/request", c.gate(c.getRequest))
	mux.HandleFunc("GET /console/api/request/stream", c.gate(c.streamRequest))
	mux.HandleFunc("GET /console/api/stats", c.gate(c.getStats))
	mux.HandleFunc("GET /console/api/tasks/{task}/push", c.gate(c.taskPush))
	mux.HandleFunc("GET /console/api/task/push", c.gate(c.taskPush))
	mux.HandleFunc("POST /console/api/demo", c.gate(c.startDemo))
	// Another method on an API path gets the console's JSON error with
	// Allow (the router's own 405 is text the page cannot read).
	// The GET paths serve HEAD too (the router's), which Allow names.
	get, post := []string{http.MethodGet, http.MethodHead}, []string{http.MethodPost}
	for path, allow := range map[string][]string{
		"/console/api/session": get, "/console/api/login": post,
		"/console/api/logout": post, "/console/api/requests": get,
		"/console/api/requests/{id}": get, "/console/api/requests/{id}/stream": get,
		"/console/api/request": get, "/console/api/request/stream": get,
		"/console/api/stats": get, "/console/api/tasks/{task}/push": get,
		"/console/api/task/push": get, "/console/api/demo": post,
	} {
		mux.HandleFunc(path, withSecurityHeaders(egress.MethodNotAllowed(allow...)))
	}
	// So does another method on a page, its login page or an asset: it
	// was 404 "no such console page" (/console redirected there first,
	// 307, by the router).
	for _, path := range []string{"/console", "/console/{$}", "/console/login", "/console/assets/"} {
		mux.HandleFunc(path, withSecurityHeaders(egress.MethodNotAllowed(get...)))
	}
	// A path under the API that names none gets the console's 404, not
	// what else the mux holds (ingress's catch-all, net/http's text).
	mux.HandleFunc("/console/api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "not_found", "no such console API")
	})
	// So does any other path under the console (a page that is not
	// there), with the console's headers: it fell through to ingress's
	// catch-all, which sets none of them.
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		http.Error(w, "no such console page", http.StatusNotFound)
	})
}

// List answers a list query (what GET /console/api/requests serves).
func (c *Console) List(ctx context.Context, q Query) (Page, error) { return c.list.List(ctx, q) }

// Lookup returns the index entry of a request, nil when it is not indexed.
func (c *Console) Lookup(ctx context.Context, requestID string) (*Entry, error) {
	return c.list.Get(ctx, requestID)
}

// Stats returns the live counters (what GET /console/api/stats serves).
func (c *Console) Stats(ctx context.Context) (*Stats, error) { return c.stats.get(ctx) }

// authError answers a refused credential: 401 unauthenticated with the
// front door's challenges, 403 forbidden for one that may not be used, 429
// for a client over the failure limit. The message is what a client reads
// of err (egress.ClientMessage: no package prefix); a 429's says when to
// retry, the Retry-After its challenge set (ingress's failure limiter), or
// throttledRetryAfter when none did. The log keeps err.Error().
func (c *Console) authError(w http.ResponseWriter, status int, err error) {
	c.o.log.Debug("console: credential refused", "status", status, "err", err.Error())
	code, msg := "unauthenticated", egress.ClientMessage(err)
	switch status {
	case http.StatusForbidden:
		code = "forbidden"
	case http.StatusTooManyRequests:
		code = "rate_limit_exceeded"
	}
	// The challenge function sets a 401's WWW-Authenticate, and a 429's
	// Retry-After (a credential refused unchecked: ingress's failure
	// limiter), on the sign-in and every other call alike.
	if (status == http.StatusUnauthorized || status == http.StatusTooManyRequests) && c.o.challenge != nil {
		c.o.challenge(w.Header(), err)
	}
	if status == http.StatusTooManyRequests {
		secs, perr := strconv.Atoi(w.Header().Get("Retry-After"))
		if perr != nil || secs < 1 {
			secs = throttledRetryAfter
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		msg = "too many failed authentications from this client address; retry in " + strconv.Itoa(secs) + " s"
	}
	apiError(w, status, code, msg)
}

// throttledRetryAfter is the Retry-After (seconds) of a 429 whose
// challenge function set none: ingress's default failure window
// (DefaultAuthFailureWindow), the longest a throttled client waits there.
const throttledRetryAfter = 60

// securityHeaders are set on every console answer: the page, its assets,
// the API answers and their errors. Their Content-Security-Policy lets
// nothing load or run (an API answer opened as a document stays inert);
// the page replaces it with pageCSP.
func securityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", answerCSP)
}

// withSecurityHeaders sets the console's headers before h answers: the
// file server of the assets and the 405 answers of egress set none.
func withSecurityHeaders(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		h.ServeHTTP(w, r)
	}
}

const answerCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	name := "assets/index.html"
	status := http.StatusOK
	if _, st, err := c.authenticate(r); err != nil {
		name, status = "assets/login.html", st
	}
	servePage(w, name, status)
}

// loginPage serves the login form whoever asks: with optional auth (the
// scheme none beside others) a visitor without a credential is the
// anonymous principal, served the page, which links here to sign in.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	stripCredentials(r.Header)
	servePage(w, "assets/login.html", http.StatusOK)
}

// servePage answers the page name of the assets with status, under the
// page's Content-Security-Policy.
func servePage(w http.ResponseWriter, name string, status int) {
	securityHeaders(w.Header())
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	b, err := assetFS.ReadFile(name)
	if err != nil {
		http.Error(w, "console assets missing", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// badQuery answers a refused list query (ErrBadQuery) 400 bad_request
// with what a client reads of it: what was wrong, without the package's
// prefix ("bad query: limit=\"0\""; egress.ClientMessage), each value of the
// client's quoted and cut to 128 bytes (jsonrpc.QuoteForMessage).
func badQuery(w http.ResponseWriter, err error) {
	apiError(w, http.StatusBadRequest, "bad_request", strings.TrimPrefix(egress.ClientMessage(err), "console: "))
}

// apiError writes {"error":{"code","message","retryable"}}, the shape of
// every E2A endpoint; only an unavailable index is worth retrying.
func apiError(w http.ResponseWriter, status int, code, msg string) {
	retryable := status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg, "retryable": retryable}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

type credentialKey struct{}

// principalFrom returns the signed-in principal; without an AuthFunc it is
// the open one (everyone sees everything).
func principalFrom(ctx context.Context) tenant.Principal {
	if p, ok := tenant.FromContext(ctx); ok {
		return p
	}
	return tenant.Principal{Open: true}
}

// gate authenticates the request (headers or the console cookie), removes
// every credential from it, and calls h with the principal in the context.
func (c *Console) gate(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get(csrfHeader) == "" {
			apiError(w, http.StatusForbidden, "forbidden", "missing "+csrfHeader+" header")
			return
		}
		cred, st, err := c.authenticate(r)
		if err != nil {
			c.authError(w, st, err)
			return
		}
		if msg := queryRefusal(r.URL.RawQuery); msg != "" {
			apiError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		// The principal travels in the context: egress's stream handler,
		// reached through streamRequest, checks it instead of asking for
		// the credential the gate has just removed.
		ctx := tenant.NewContext(r.Context(), cred.principal)
		ctx = context.WithValue(ctx, credentialKey{}, cred)
		h(w, r.WithContext(ctx))
	}
}

// queryRefusal is why the console's API refuses a request's query, raw
// ("" when it does not): one that is no URL-encoded form (?status=fai%zzled,
// a semicolon between parameters), whose unreadable pairs r.URL.Query()
// dropped, and with them the filter the client named (the list answered
// every status); or a parameter given twice with different values
// (?status=failed&status=succeeded), of which the first was read. Ingress
// refuses both at every door, and so the read API (400 invalid_request).
func queryRefusal(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "the query cannot be read: " + err.Error()
	}
	if name := egress.RepeatedParam(q); name != "" {
		return "query parameter " + strconv.Quote(name) + " is given twice with different values"
	}
	return ""
}

type sessionInfo struct {
	Principal    string `json:"principal,omitempty"`
	AuthRequired bool   `json:"auth_required"`
	// SignedIn says whether a credential was presented (a header or the
	// sign-in cookie); with optional auth a visitor without one is the
	// anonymous principal, whom the page offers the sign-in form.
	SignedIn bool     `json:"signed_in"`
	Demo     bool     `json:"demo"`
	DemoPool string   `json:"demo_pool,omitempty"`
	Statuses []string `json:"statuses"`
	Indexer  bool     `json:"indexer"`
	// Stats says whether the principal is answered the counters (GET
	// /console/api/stats: seesStats); the page shows them only then.
	Stats bool `json:"stats"`
}

func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	cred, _ := r.Context().Value(credentialKey{}).(credential)
	writeJSON(w, http.StatusOK, sessionInfo{Principal: principalFrom(r.Context()).ID, AuthRequired: c.o.auth != nil,
		SignedIn: c.o.auth != nil && cred.scheme != "",
		Demo:     c.o.demo != nil, DemoPool: c.o.demoPool, Statuses: Statuses, Indexer: !c.o.noIndexer,
		Stats: seesStats(principalFrom(r.Context()))})
}

// parseTime reads an RFC 3339 time, or a duration meaning that long ago.
func parseTime(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			// "-5m ago" is five minutes ahead (and the most negative
			// duration wrapped to the past), as e2a tail --since refuses.
			return time.Time{}, fmt.Errorf("%w: %s: a duration ago is not negative (15m)", ErrBadQuery, jsonrpc.QuoteForMessage(v))
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s is neither an RFC 3339 time nor a duration (15m)", ErrBadQuery, jsonrpc.QuoteForMessage(v))
	}
	return t, nil
}

// QueryFromURL reads a list query from URL parameters.
func QueryFromURL(v url.Values, now time.Time) (Query, error) {
	q := Query{RequestID: v.Get("request_id"), TaskID: v.Get("task"), SessionID: v.Get("session"),
		ContextID: v.Get("context"), User: v.Get("user"), Status: v.Get("status")}
	var err error
	if q.Since, err = parseTime(v.Get("since"), now); err != nil {
		return q, err
	}
	if q.Until, err = parseTime(v.Get("until"), now); err != nil {
		return q, err
	}
	if s := v.Get("before"); s != "" {
		if q.Before, err = strconv.ParseUint(s, 10, 64); err != nil {
			return q, fmt.Errorf("%w: before=%s", ErrBadQuery, jsonrpc.QuoteForMessage(s))
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 1 {
			return q, fmt.Errorf("%w: limit=%s", ErrBadQuery, jsonrpc.QuoteForMessage(s))
		}
	}
	return q, nil
}

func (c *Console) listRequests(w http.ResponseWriter, r *http.Request) {
	q, err := QueryFromURL(r.URL.Query(), time.Now())
	if err == nil {
		// Checked before the user filter is: a bad query on another
		// principal's requests is refused as one on one's own, not
		// answered as a search that found nothing.
		err = q.validate()
	}
	if err != nil {
		badQuery(w, err)
		return
	}
	if p := principalFrom(r.Context()); !p.SeesAll() {
		// Only the principal's own requests: the user filter is forced,
		// and a filter on someone else matches nothing.
		if q.User != "" && q.User != p.ID {
			writeJSON(w, http.StatusOK, Page{Entries: []Entry{}})
			return
		}
		q.User = p.ID
	}
	page, err := c.list.List(r.Context(), q)
	switch {
	case errors.Is(err, ErrBadQuery):
		badQuery(w, err)
	case err != nil:
		c.o.log.Warn("console: list failed", "err", err)
		apiError(w, http.StatusServiceUnavailable, "unavailable", "the index could not be read; retry")
	default:
		writeJSON(w, http.StatusOK, page)
	}
}

// RequestDetail is what GET /console/api/requests/{id} answers.
type RequestDetail struct {
	RequestID string `json:"request_id"`
	// Entry is the index entry (nil when the index does not hold it).
	Entry *Entry `json:"entry"`
	// Envelope is the stored envelope without auth fields, nil when
	// E2A_REQUESTS no longer holds it.
	Envelope map[string]any `json:"envelope"`
	// History says the detail was read from the audit history (egress's
	// WithHistory): the hot streams no longer hold the request.
	History       bool   `json:"history,omitempty"`
	ReplayCommand string `json:"replay_command"`
	StreamURL     string `json:"stream_url"`
}

// requestID is the request id a detail or stream call names: its path
// segment, or, on the routes that take it in the query, ?id= ("" when
// absent: no request has that id).
func requestID(r *http.Request) string {
	if id := r.PathValue("id"); id != "" {
		return id
	}
	return r.URL.Query().Get("id")
}

func (c *Console) getRequest(w http.ResponseWriter, r *http.Request) {
	id := requestID(r)
	if id == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "missing request id (?id=)")
		return
	}
	if err := subjects.ValidateID(id); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "invalid request id")
		return
	}
	d, found, err := c.findDetail(r.Context(), id)
	switch {
	case errors.Is(err, egress.ErrHistoryCorrupt):
		// Permanent, as on egress's GET: retrying reads the same batch.
		apiError(w, http.StatusInternalServerError, egress.CodeHistoryCorrupt, egress.ClientMessage(err))
	case err != nil:
		// An unreadable stream is not an absent request: the page (and
		// any client) tries again, as on egress's GET.
		c.o.log.Warn("console: request lookup failed", "err", err)
		apiError(w, http.StatusServiceUnavailable, "unavailable", "the request could not be read; retry")
	case found:
		writeJSON(w, http.StatusOK, d)
	default:
		apiError(w, http.StatusNotFound, "not_found", egress.NotFoundMessage)
	}
}

// findDetail is the detail of request id for the principal of ctx: from
// the hot streams, else from the audit history (egress's WithHistory),
// as egress's GET /v1/requests/{id} answers it. found is false for a
// request neither holds, or another principal's (the same answer).
func (c *Console) findDetail(ctx context.Context, id string) (d RequestDetail, found bool, err error) {
	may, err := c.mayRead(ctx, id)
	if err != nil {
		return d, false, err
	}
	if may {
		if d, found, err = c.detail(ctx, id); err != nil || found {
			return d, found, err
		}
	}
	// The hot streams hold none of it for this principal (or another's
	// envelope: the History is asked all the same, as egress asks it, so
	// that the work tells no more than the answer).
	if c.svc == nil {
		return d, false, nil
	}
	env, err := c.svc.HistoricEnvelope(ctx, principalFrom(ctx), id)
	if err != nil || env == nil {
		return d, false, err
	}
	return RequestDetail{RequestID: id, Envelope: RedactEnvelope(env), History: true, ReplayCommand: ReplayCommand(id),
		StreamURL: streamURL(id)}, true, nil
}

// streamURL is where the stream of request id is read: its path, or for
// the ids "." and "..", which a browser resolves as dot segments even
// escaped (fetch, EventSource), the form with the id in the query.
func streamURL(id string) string {
	if id == "." || id == ".." {
		return "/console/api/request/stream?id=" + url.QueryEscape(id)
	}
	return "/console/api/requests/" + egress.PathSegment(id) + "/stream"
}

// detail reads what GET /console/api/requests/{id} answers; found is false
// when neither stream holds the request. A failed read of the index entry
// or the envelope is logged and the detail shown without it, unless
// nothing of the request could be read (err).
func (c *Console) detail(ctx context.Context, id string) (d RequestDetail, found bool, err error) {
	d = RequestDetail{RequestID: id, ReplayCommand: ReplayCommand(id),
		StreamURL: streamURL(id)}
	e, ierr := c.list.Get(ctx, id)
	if ierr != nil {
		c.o.log.Warn("console: index lookup failed", "err", ierr)
	}
	d.Entry = e
	var eerr error
	subj, serr := subjects.RequestAnyPool(id)
	if serr == nil {
		if e != nil && e.Pool != "" {
			if s, err := subjects.Request(e.Pool, id); err == nil {
				subj = s
			}
		}
		msg, err := streams.LastBySubject(ctx, c.nc, streams.RequestsStream, subj)
		switch {
		case err == nil:
			d.Envelope = RedactEnvelope(msg.Data)
		case errors.Is(err, streams.ErrNoMessages):
		default:
			eerr = err
			c.o.log.Warn("console: envelope lookup failed", "err", err)
		}
	}
	if d.Entry != nil || d.Envelope != nil {
		return d, true, nil
	}
	// Frames may outlive the envelope: let the stream decide.
	_, err = streams.LastBySubject(ctx, c.nc, streams.ResponsesStream, mustResponse(id))
	if errors.Is(err, streams.ErrNoMessages) {
		return d, false, cmp.Or(ierr, eerr)
	}
	return d, err == nil, err
}

func mustResponse(id string) string {
	s, _ := subjects.Response(id)
	return s
}

// mayRead applies the ownership rule to one request: its owner is the
// user_id of its stored envelope. Another principal's request costs the
// reads of an unknown one, whose absence the stream's leader confirms (as
// egress's own check does): the answer does not tell it exists; the timing
// does, by the envelope's fetch and decoding (docs/security.md). err is a
// read that failed.
func (c *Console) mayRead(ctx context.Context, id string) (bool, error) {
	p := principalFrom(ctx)
	if p.SeesAll() {
		return true, nil
	}
	subj, err := subjects.RequestAnyPool(id)
	if err != nil {
		return false, nil
	}
	var owner string
	found, confirmed := false, false
	if c.svc != nil {
		// Egress's lookup, which asks the leader when a replica finds
		// none (a lagging replica may miss a request just made).
		owner, found, err = c.svc.Owner(ctx, id)
		confirmed = !found
	} else {
		var msg streams.RawMsg
		if msg, err = streams.LastBySubject(ctx, c.nc, streams.RequestsStream, subj); err == nil {
			owner, found = ownerOfData(msg.Data), true
		}
	}
	if errors.Is(err, streams.ErrNoMessages) {
		err = nil
	}
	if err != nil {
		return false, err
	}
	if !confirmed && !(found && p.Allows(tenant.Read, owner)) {
		// The leader's confirmation an unknown id costs (and, without
		// egress, the lookup of a request a lagging replica missed).
		m, err := streams.LeaderLastBySubject(ctx, c.nc, streams.RequestsStream, subj)
		switch {
		case err == nil && !found:
			owner, found = ownerOfData(m.Data), true
		case err != nil && !errors.Is(err, streams.ErrNoMessages):
			return false, err
		}
	}
	return found && p.Allows(tenant.Read, owner), nil
}

// ownerOfData returns the user_id of a stored envelope ("" for one that is
// not an envelope).
func ownerOfData(data []byte) string {
	var probe struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal(data, &probe)
	return probe.UserID
}

// streamRequest serves egress's GET /v1/requests/{id}/stream, unchanged,
// behind the console's auth (the principal is in the request's context,
// where egress's ownership check finds it).
func (c *Console) streamRequest(w http.ResponseWriter, r *http.Request) {
	if c.egress == nil {
		apiError(w, http.StatusNotImplemented, "not_implemented", "no egress service")
		return
	}
	id := requestID(r)
	if id == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "missing request id (?id=)")
		return
	}
	// The console shows frames with their secrets replaced, as it shows
	// envelopes.
	r2 := r.Clone(egress.RedactFrames(r.Context()))
	if r.PathValue("id") == "" {
		q := r2.URL.Query()
		q.Del("id") // the id goes in egress's path; from stays
		r2.URL.RawQuery = q.Encode()
	}
	r2.URL.Path = "/v1/requests/" + id + "/stream"
	r2.URL.RawPath = "/v1/requests/" + egress.PathSegment(id) + "/stream"
	r2.RequestURI = r2.URL.RequestURI()
	// The console's headers on egress's answer too (its 404, its stream),
	// as on every console answer.
	securityHeaders(w.Header())
	c.egress.ServeHTTP(w, r2)
}

// seesStats reports whether p is answered the counters: they are the
// deployment's (every principal's requests in the stream figures, every
// tenant's rates, every pool and its upstream), so only a principal that
// sees every principal's requests (the audit or admin role, or anyone with
// authentication off) does; nothing in them is one principal's to scope.
func seesStats(p tenant.Principal) bool { return p.SeesAll() }

func (c *Console) getStats(w http.ResponseWriter, r *http.Request) {
	if !seesStats(principalFrom(r.Context())) {
		apiError(w, http.StatusForbidden, "forbidden", "the counters are the deployment's: the audit or admin role sees them")
		return
	}
	st, err := c.stats.get(r.Context())
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "unavailable", "metrics unavailable")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// demoRequest is the body of POST /console/api/demo.
type demoRequest struct {
	Text    string `json:"text"`
	Frames  int    `json:"frames"`
	DelayMS int    `json:"delay_ms"`
}

func (c *Console) startDemo(w http.ResponseWriter, r *http.Request) {
	if c.o.demo == nil {
		apiError(w, http.StatusNotFound, "not_found", "no demo pool in this process")
		return
	}
	var d demoRequest
	if !decodeBody(w, r, 64<<10, &d, `{"text":…,"frames":…,"delay_ms":…}`) {
		return
	}
	if d.Text == "" {
		d.Text = "hello from the console"
	}
	d.Frames = min(max(d.Frames, 1), 200)
	d.DelayMS = min(max(d.DelayMS, 0), 5000)
	body, _ := json.Marshal(map[string]any{"params": map[string]any{"text": d.Text, "frames": d.Frames, "delay_ms": d.DelayMS}})
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/requests?agent="+url.QueryEscape(c.o.demoPool), strings.NewReader(string(body)))
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	if cred, ok := r.Context().Value(credentialKey{}).(credential); ok {
		cred.apply(req.Header)
	}
	rec := &recorder{header: http.Header{}}
	c.o.demo.ServeHTTP(rec, req)
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.status())
	_, _ = w.Write(rec.body)
}

// recorder captures the answer of the demo handler.
type recorder struct {
	header http.Header
	code   int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if len(r.body) < 1<<20 {
		r.body = append(r.body, b...)
	}
	return len(b), nil
}
func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

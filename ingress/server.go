package ingress

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// Server is the HTTP front door. Create it with [New]; it is safe for
// concurrent use and holds no per-request state between calls.
type Server struct {
	pools *pools // nil: every pool accepted
	// presence tells the pools with a live worker, for the pool check and
	// Pools (/readyz).
	presence *streams.Presence
	// keeper keeps the records of the running turns this server published
	// (keepRecord), and of those it took over from a replica gone
	// (takeOver).
	keeper recordKeeper
	// keptLook, set by tests only (SetKeptLookHook), is called at each
	// look of the keeper that finds a kept turn running, before the
	// turn's key of the keeper list is written (lookAt).
	keptLook atomic.Pointer[func(requestID string)]
	// unpublished are the turns whose removal from their record (their
	// publish failed) is retried in the background (takeOutLater).
	unpublished unpublishedTurns
	// endedTurns remembers a turn found ended per record, for the bound on
	// waiting turns (waitBound).
	endedTurns endedTurns
	// poolList caches the pool names the pipeline's card lists.
	poolList poolCache
	// profiles caches the pools' profiles (extcard.go).
	profiles profileCache
	pub      *Publisher
	egress   *egress.Service
	opts     options
	metrics  *metrics
	js       jetstream.JetStream
	nc       *nats.Conn
	// bound are the bindings of the registry's binding servers, by
	// protocol (bindProtocols); v1 is the first's (A2A v1.0's), v1rpc its
	// JSON-RPC handler counted in the requests metric (a2a, v1).
	bound  map[string]host.Bindings
	v1     host.Bindings
	v1name string
	v1rpc  http.Handler
	// cancelTurnChecked, set by tests only (SetCancelTurnHook), is called
	// between the check of an interrupted task's last turn and the append
	// of its cancel turn (cancelInterrupted).
	cancelTurnChecked func(taskID string)
	// cancelNewerTurn, set by tests only (SetCancelNewerTurnHook), is
	// called when the cancel of an interrupted task finds a turn appended
	// since its check not finished, before it cancels that turn
	// (cancelInterrupted, cancelRunning).
	cancelNewerTurn func(taskID, requestID string)
	// cancelChecking, set by tests only (SetCancelCheckHook), is called
	// when the cancel of an interrupted task is about to read the frames
	// of the task's requests as it read them last (cancelInterrupted).
	cancelChecking atomic.Pointer[func(taskID string, requestIDs []string)]
	// markMet, set by tests only (SetMarkMetHook), is called when a
	// turn's append meets the mark of a running turn that tasks/cancel is
	// cancelling (appendPastMark), before it awaits that turn's end.
	markMet atomic.Pointer[func(taskID, requestID, marked string)]
	// cancelMarked, set by tests only (SetCancelMarkedHook), is called
	// once tasks/cancel has marked the task's newest turn, before it
	// cancels it (cancelRunning).
	cancelMarked atomic.Pointer[func(taskID, requestID string)]
	// turnAppended, set by tests only (SetAppendedHook), is called once a
	// turn is appended to its task's or session's record, before it is
	// checked again (stillOpen) and published (publishTurnIf).
	turnAppended atomic.Pointer[func(kind, id, requestID string)]
	// unstoredBefore, set by tests only (SetUnstoredBeforeHook), is called
	// when stillOpen finds a turn listed before the turn it checks not
	// stored (endedBefore), before it awaits it.
	unstoredBefore atomic.Pointer[func(taskID, requestID, unstored string)]
	// recordReading and recordRead, set by tests only
	// (SetRecordReadHook), are called when a caller is about to read a
	// task's record (rpcCaller.Task), and once it has, with its requests.
	recordReading atomic.Pointer[func(taskID string)]
	// laterReading and laterRead, set by tests only (SetLaterTurnHook),
	// are called when a turn's stream is about to read the turn its
	// task's record lists after it (rpcCaller.LaterTurn), and once it
	// has, with that turn ("" when none).
	laterReading atomic.Pointer[func(taskID string)]
	laterRead    atomic.Pointer[func(taskID, next string)]
	recordRead   atomic.Pointer[func(taskID string, requestIDs []string)]
}

type options struct {
	defaultPool    string
	maxBody        int64
	publishTimeout time.Duration
	log            *slog.Logger
	reg            prometheus.Registerer
	now            func() time.Time
	auth           *Auth
	limiter        *Limiter
	streams        *StreamLimiter
	norm           *normalizer.Normalizer
	routes         *normalizer.Routes
	publicURL      string
	grpcAddr       string
	cardName       string
	tasks          *TaskStore
	workflow       *workflow.Executor
	workflowLimits *RateLimits // WithWorkflowRateLimits; nil: the spec's defaults
	a2eTypes       *normalizer.Registry
	protocols      *protocols.Registry // WithProtocols
	poolTTL        time.Duration
	push           *push.Store // WithPushStore; nil: no push notifications
	noExtendedCard bool        // WithExtendedCard(false)
	// maxWaitingTurns bounds the turns of a task or session waiting
	// behind its running turn (WithMaxWaitingTurns); 0: unbounded.
	maxWaitingTurns int
}

// WithA2ETypes sets the A2E type registry (the base map plus the types
// plugins registered at start-up).
func WithA2ETypes(r *normalizer.Registry) Option {
	return func(o *options) error { o.a2eTypes = r; return nil }
}

// WithAuth enforces auth on every endpoint (default: none, anonymous).
func WithAuth(a *Auth) Option {
	return func(o *options) error {
		if a == nil {
			return fmt.Errorf("ingress: nil auth")
		}
		o.auth = a
		return nil
	}
}

// WithLimiter applies per-principal rate limits shared across replicas.
func WithLimiter(l *Limiter) Option {
	return func(o *options) error { o.limiter = l; return nil }
}

// WithStreamLimiter bounds concurrent streams per principal.
func WithStreamLimiter(l *StreamLimiter) Option {
	return func(o *options) error { o.streams = l; return nil }
}

// WithRoutes sets the routing rule (method or channel → pool). The
// default pool of the rule is the one of WithDefaultPool when the rule has
// none.
func WithRoutes(r normalizer.Routes) Option {
	return func(o *options) error { o.routes = &r; return nil }
}

// WithPublicURL sets the externally visible base URL (agent card); by
// default it is derived from the request and X-Forwarded-* headers.
func WithPublicURL(u string) Option {
	return func(o *options) error {
		if u != "" {
			if _, err := url.Parse(u); err != nil {
				return fmt.Errorf("ingress: public url: %w", err)
			}
		}
		o.publicURL = strings.TrimRight(u, "/")
		return nil
	}
}

// WithA2AGRPCAddress makes the agent card list the A2A v1.0 gRPC binding
// (see Server.A2AGRPC) at addr, "host:port". A host that is empty or
// unspecified (":9090", "0.0.0.0:9090") is replaced by the host of the
// card's base URL.
func WithA2AGRPCAddress(addr string) Option {
	return func(o *options) error {
		if addr != "" {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return fmt.Errorf("ingress: A2A gRPC address %q: %w", addr, err)
			}
		}
		o.grpcAddr = addr
		return nil
	}
}

// Option configures a Server.
type Option func(*options) error

// WithProtocols sets the protocols the server mounts (default
// protocols.Default(), every protocol of the pipeline): each protocol's
// service, by the roles it implements (Server.Register). A protocol added
// beside the pipeline's is served this way, with no other change.
func WithProtocols(r *protocols.Registry) Option {
	return func(o *options) error {
		if r == nil {
			return fmt.Errorf("%w: nil protocol registry", ErrInvalidOption)
		}
		o.protocols = r
		return nil
	}
}

// WithDefaultPool sets the pool for requests that name none (default "demo").
func WithDefaultPool(pool string) Option {
	return func(o *options) error {
		if !validPool(pool) {
			return fmt.Errorf("%w: %q", ErrInvalidPool, pool)
		}
		o.defaultPool = pool
		return nil
	}
}

// WithMaxBodyBytes bounds request bodies; larger ones get 413.
func WithMaxBodyBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("ingress: max body bytes must be > 0")
		}
		o.maxBody = n
		return nil
	}
}

// DefaultMaxWaitingTurns is the bound of WithMaxWaitingTurns unless set
// (E2A_MAX_WAITING_TURNS): with the agent runtime's MaxAckPending
// (1,000), a pool of up to 128 concurrent turns (e2a dev's one worker of
// 32; the shipped demo pool's 2 workers of 64) whose every running turn
// has 6 more waiting holds 128 × 7 = 896 deliveries, under 1,000, so
// waiting turns never take the last delivery the pool's concurrency
// could use.
const DefaultMaxWaitingTurns = 6

// WithMaxWaitingTurns bounds the turns of one A2A or AgentVault task (or
// E2A task_id) or ACP session that may wait behind its running turn: a
// turn that would make more than n wait is refused with ErrTooManyTurns,
// nothing written or published (each door's 429, retryable). Each waiting
// turn holds its delivery in its pool's MaxAckPending until it has run,
// so choose n so that the pool's concurrency × (n + 1) stays under the
// pool's MaxAckPending. 0 turns the bound off; negative is ErrInvalidOption.
// Default DefaultMaxWaitingTurns.
func WithMaxWaitingTurns(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("%w: max waiting turns %d must not be negative (0: unbounded)", ErrInvalidOption, n)
		}
		o.maxWaitingTurns = n
		return nil
	}
}

// WithPublishTimeout bounds the wait for a PubAck (default 5 s).
func WithPublishTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("ingress: publish timeout must be > 0")
		}
		o.publishTimeout = d
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(o *options) { o.log = l })
}

// WithRegisterer registers the ingress metrics on reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) error { o.reg = reg; return nil }
}

// New returns a Server publishing through nc's JetStream and handing
// streamed answers to eg. eg's read API is gated as the Server's
// endpoints are (egress.Service.SetReadGate): the rate limit, the stream
// slots of its streams and waits, the challenge of a 401.
func New(nc *nats.Conn, eg *egress.Service, opts ...Option) (*Server, error) {
	o := options{defaultPool: "demo", maxBody: 4 << 20, publishTimeout: host.DefaultPublishTimeout, log: slog.Default(), now: time.Now,
		protocols: protocols.Default(), maxWaitingTurns: DefaultMaxWaitingTurns}
	if err := option.Apply(ErrInvalidOption, &o, opts); err != nil {
		return nil, err
	}
	if nc == nil || eg == nil {
		return nil, fmt.Errorf("%w: nil NATS connection or egress service", ErrInvalidOption)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	routes := normalizer.Routes{Default: o.defaultPool}
	if o.routes != nil {
		routes = *o.routes
		if routes.Default == "" {
			routes.Default = o.defaultPool
		}
	}
	if o.a2eTypes == nil {
		o.a2eTypes = normalizer.NewRegistry()
	}
	o.norm = normalizer.New(normalizer.Config{Routes: routes, A2ETypes: o.a2eTypes})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts, err := NewTaskStore(ctx, js)
	if err != nil {
		return nil, err
	}
	ts.history = eg.HistoricRequestMsg
	ts.turns.keepAged = eg != nil
	o.tasks = ts
	srv := &Server{pub: NewPublisher(js, o.publishTimeout), egress: eg, opts: o, metrics: m, js: js, nc: nc,
		presence: streams.NewPresence(0)}
	srv.bindProtocols()
	if eg != nil {
		// egress's read API is gated as ingress's endpoints are.
		eg.SetReadGate(readGate{s: srv})
	}
	if o.poolTTL > 0 {
		srv.pools = newPools(js, o.poolTTL, o.now, srv.presence)
	}
	if o.push != nil {
		o.push.OnCreate(srv.pushConfigCreated)
	}
	srv.startKeeper()
	return srv, nil
}

// Register mounts the E2A endpoints on mux:
//
//	POST /v1/requests[?agent=POOL][&wait=true]   E2A envelope or legacy AgentRequest (package
//	                                             protocols/e2a, mounted from the registry)
//	POST /a2a                                    A2A v0.3 and AgentVault JSON-RPC (package
//	                                             protocols/a2a, its endpoint served by serveRPC
//	                                             from the registry; a single v1.0 call goes to
//	                                             the v1.0 handler)
//	POST /a2a/v1                                 A2A v1.0 JSON-RPC, and under /a2a/v1/ its
//	                                             HTTP+JSON binding (package protocols/a2av1's
//	                                             bindings, from the registry)
//	POST /a2e                                    A2E NDJSON messages (package protocols/a2e,
//	                                             mounted from the registry)
//	POST /acp                                    ACP JSON-RPC (package protocols/acp, its
//	                                             endpoint served by serveRPC from the registry)
//	GET  /.well-known/agent-card.json            A2A agent card (also /.well-known/agent.json, and
//	                                             under /a2a and /a2a/v1 for clients that look
//	                                             beside the interface URL; package
//	                                             protocols/a2av1's card, from the registry)
//	/api/v1/workflows/…, /health                 the A2E workflow API (WithWorkflow; package
//	                                             workflow's routes, from the registry)
//	POST /oauth/token                            OAuth2 client credentials (when enabled)
//	/                                            anything no pattern of mux takes (mounted here,
//	                                             so the caller mounts nothing at "/"): 405 with
//	                                             Allow when mux serves the path for other
//	                                             methods, else 404, in the E2A error object
func (s *Server) Register(mux *http.ServeMux) {
	s.mountProtocols(mux)
	mux.HandleFunc("GET /{$}", handleRoot)
	mux.HandleFunc("/", unrouted(mux))
	s.mountPools(mux)
	if s.opts.auth != nil && s.opts.auth.Enabled(SchemeOAuth2) {
		mux.Handle("POST /oauth/token", s.opts.auth.TokenHandler())
	}
}

// AcceptedBody is the body of a 202 answer to POST /v1/requests (package
// protocols/e2a's).
type AcceptedBody = e2aproto.AcceptedBody

// HeaderWarning carries Accepted.Warning on every answer of an accepted
// request (streamed ones included).
const HeaderWarning = e2aproto.HeaderWarning

// handleRoot answers GET / with where to go: a browser is sent to the
// console, anything else gets the list of endpoints. Under /pools/<pool>/
// the front doors listed are the pool's, under that prefix (the bare ones
// reach the default pool); the console, the workflow API and the
// operations are the pipeline's.
func handleRoot(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/console", http.StatusFound)
		return
	}
	var at string
	if pool, ok := poolFromContext(r.Context()); ok {
		at = PoolsPath + pool
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"service": "e2a-pipeline",
		"console": "/console",
		"endpoints": map[string]string{
			"e2a":        fmt.Sprintf("POST %[1]s/v1/requests, GET %[1]s/v1/requests/{id}, GET %[1]s/v1/requests/{id}/stream", at),
			"a2a":        fmt.Sprintf("POST %s/a2a (A2A v0.3 and AgentVault JSON-RPC)", at),
			"a2a_v1":     fmt.Sprintf("POST %[1]s/a2a/v1 (A2A v1.0 JSON-RPC); %[1]s/a2a/v1/message:send, %[1]s/a2a/v1/message:stream, %[1]s/a2a/v1/tasks (A2A v1.0 HTTP+JSON)", at),
			"agent_card": fmt.Sprintf("GET %s/.well-known/agent-card.json", at),
			"acp":        fmt.Sprintf("POST %s/acp", at),
			"a2e":        fmt.Sprintf("POST %s/a2e", at),
			"workflows":  "/health, /api/v1/capabilities, /api/v1/workflows/validate, /api/v1/workflows/execute, /api/v1/executions/{id}, /api/v1/rate-limit/status",
			"operations": "/metrics, /healthz, /readyz",
		},
		"docs": "README.md of the repository: quick start, protocols with curl examples, subjects, operations",
	})
}

// input builds the normalizer's view of an HTTP request.
func (s *Server) input(r *http.Request, body []byte, p Principal, agent string, fresh *freshIDs) normalizer.Input {
	return s.inputFrom(r.Header, body, p, agent, fresh)
}

// inputFrom is input for a transport's headers. The ids the normalizer
// makes are recorded in fresh (freshIDs; none when nil).
func (s *Server) inputFrom(header http.Header, body []byte, p Principal, agent string, fresh *freshIDs) normalizer.Input {
	in := normalizer.Input{Body: body, Header: header, Channel: "http", Agent: agent, Now: s.opts.now,
		RequestID: header.Get("Idempotency-Key")}
	if fresh != nil {
		in.NewID = fresh.newID
		fresh.setAgent(agent)
	}
	if p.UserID != "" {
		// With authentication off (the none scheme alone) the principal is
		// only a default: the user the request claims is all there is to
		// know, so it is kept. Otherwise the authenticated principal wins,
		// the anonymous one of optional auth included: an unauthenticated
		// request can never carry the identity of a configured principal.
		in.Principal = &normalizer.Principal{UserID: p.UserID, IdentityOrigin: p.IdentityOrigin, Scheme: p.Scheme, AssertsUser: p.Open}
	}
	return in
}

func validPool(p string) bool { return subjects.ValidatePool(p) == nil }

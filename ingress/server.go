package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// E2AStreamer serves the frames of an accepted request in the format the
// client negotiated (SSE, NDJSON or aggregated JSON). egress.Service
// implements it. ServeE2A writes the whole HTTP answer and returns when the
// request's final frame was written or the client went away; it must be
// safe for concurrent use.
type E2AStreamer interface {
	ServeE2A(w http.ResponseWriter, r *http.Request, requestID string)
}

// Server is the HTTP front door. Create it with [New]; it is safe for
// concurrent use and holds no per-request state between calls.
type Server struct {
	pub     *Publisher
	egress  E2AStreamer
	opts    options
	metrics *metrics
}

type options struct {
	defaultPool    string
	maxBody        int64
	publishTimeout time.Duration
	log            *slog.Logger
	reg            prometheus.Registerer
	now            func() time.Time
}

// Option configures a Server.
type Option func(*options) error

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
	return func(o *options) error { o.log = l; return nil }
}

// WithRegisterer registers the ingress metrics on reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) error { o.reg = reg; return nil }
}

// New returns a Server publishing through nc's JetStream and handing
// streamed answers to eg.
func New(nc *nats.Conn, eg E2AStreamer, opts ...Option) (*Server, error) {
	o := options{defaultPool: "demo", maxBody: 4 << 20, publishTimeout: 5 * time.Second, log: slog.Default(), now: time.Now}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	return &Server{pub: NewPublisher(js, o.publishTimeout), egress: eg, opts: o, metrics: m}, nil
}

// Register mounts the E2A endpoints on mux:
//
//	POST /v1/requests[?agent=POOL][&wait=true]
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/requests", s.handleE2A)
}

// Accepted is the body of a 202 answer to POST /v1/requests.
type AcceptedBody struct {
	RequestID string            `json:"request_id"`
	Pool      string            `json:"pool"`
	Duplicate bool              `json:"duplicate,omitempty"`
	Links     map[string]string `json:"links"`
}

func (s *Server) handleE2A(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	var reqID string
	defer func() {
		s.metrics.requests.WithLabelValues("e2a", "POST /v1/requests", itoa(int64(rec.code))).Inc()
		logRequest(s.opts.log, r, rec.code, start, reqID)
	}()
	w = rec
	body, ok := readBody(w, r, s.opts.maxBody)
	if !ok {
		return
	}
	env, err := normalizeE2A(body, r, s.opts.now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error(), false)
		return
	}
	pool := r.URL.Query().Get("agent")
	if pool == "" {
		pool = s.opts.defaultPool
	}
	if !validPool(pool) {
		writeError(w, http.StatusBadRequest, "invalid_agent", fmt.Sprintf("agent %q must match [A-Za-z0-9_-]{1,64}", pool), false)
		return
	}
	if wantsStream(r) || r.URL.Query().Get("wait") == "true" {
		env.IsStream = env.IsStream || wantsStream(r)
	}
	reqID = env.RequestID
	pubStart := time.Now()
	acc, err := s.pub.Publish(r.Context(), pool, env)
	s.metrics.publish.Observe(time.Since(pubStart).Seconds())
	if err != nil {
		switch {
		case errors.Is(err, ErrInvalidPool):
			writeError(w, http.StatusBadRequest, "invalid_agent", err.Error(), false)
		case errors.Is(err, context.Canceled):
			writeError(w, 499, "client_closed", "client went away before the request was accepted", true)
		default:
			s.opts.log.Warn("publish failed", "request_id", reqID, "err", err)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the pipeline could not accept the request; retry later", true)
		}
		return
	}
	if wantsStream(r) || r.URL.Query().Get("wait") == "true" {
		s.egress.ServeE2A(w, r, acc.RequestID)
		return
	}
	writeJSON(w, http.StatusAccepted, AcceptedBody{
		RequestID: acc.RequestID,
		Pool:      acc.Pool,
		Duplicate: acc.Duplicate,
		Links:     links(acc.RequestID),
	})
}

func links(id string) map[string]string {
	p := "/v1/requests/" + url.PathEscape(id)
	return map[string]string{"self": p, "stream": p + "/stream"}
}

// normalizeE2A reads a raw E2A envelope or a legacy AgentRequest and fills
// what the pipeline needs: request_id (UUID v7 unless given), timestamp,
// provenance, trace context; secrets are stripped.
func normalizeE2A(body []byte, r *http.Request, now time.Time) (*e2a.Envelope, error) {
	env, err := e2a.FromJSON(body)
	if err != nil {
		return nil, err
	}
	if env.RequestID == "" {
		env.RequestID = uuid.Must(uuid.NewV7()).String()
	}
	return env, nil
}

func validPool(p string) bool { return subjects.ValidatePool(p) == nil }

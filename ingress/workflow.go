package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// WithWorkflow serves the A2E workflow REST API (/health,
// /api/v1/capabilities, /api/v1/workflows/validate, /api/v1/workflows/execute,
// /api/v1/executions/{id}, /api/v1/rate-limit/status) with exec validating
// and describing capabilities: the routes of the registry's a2e.workflow
// entry (workflow.Routes over protocolHost.WorkflowAPI), mounted with the
// other protocols and counted in the requests metric under a2e.workflow.
// Executions run on the workflow pool.
func WithWorkflow(exec *workflow.Executor) Option {
	return func(o *options) error { o.workflow = exec; return nil }
}

// WithWorkflowRateLimits sets the per-agent request limits of the workflow
// REST API for a server without a limiter of its own (WithLimiter). The
// default is the A2E workflow specification's DefaultRateLimits() (60 a
// minute, 1000 an hour, 10000 a day per principal), counted in the shared
// E2A_RATELIMIT bucket; RateLimits{} turns them off. With WithLimiter the
// workflow API counts against that limiter like every other endpoint, and
// these limits are not used. Negative limits are ErrInvalidRateLimits, and
// so is a budget of request bytes (RateLimits.BytesPerMinute…): the
// requests are published by the server, whose limiter (WithLimiter) is
// what counts their bytes.
func WithWorkflowRateLimits(l RateLimits) Option {
	return func(o *options) error {
		if l.negative() {
			return fmt.Errorf("%w: %+v", ErrInvalidRateLimits, l)
		}
		if l.countsBytes() {
			return fmt.Errorf("%w: a budget of request bytes is the server's limiter's (WithLimiter), not the workflow API's", ErrInvalidRateLimits)
		}
		o.workflowLimits = &l
		return nil
	}
}

// workflowLimiter returns the limiter of the workflow API: the server's,
// else one with the workflow limits (nil when they are off) over the shared
// bucket, provisioned here; when the bucket cannot be had, the limits are
// counted per process (and a warning says so).
func (s *Server) workflowLimiter() *Limiter {
	if s.opts.limiter != nil {
		return s.opts.limiter
	}
	lim := DefaultRateLimits()
	if s.opts.workflowLimits != nil {
		lim = *s.opts.workflowLimits
	}
	if lim.disabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := EnsureRateLimitBucket(ctx, s.js)
	if err != nil {
		s.opts.log.Warn("workflow API rate limits are counted per process: the rate limit bucket is unavailable", "err", err)
		kv = nil
	}
	return NewLimiter(kv, LimiterConfig{Limits: lim})
}

// workflowLimit applies l to one workflow API call: 429 with the
// specification's body and headers, or 503 when a fail-closed limiter
// cannot decide.
func (s *Server) workflowLimit(l *Limiter) func(w http.ResponseWriter, r *http.Request, p workflow.Principal) bool {
	return func(w http.ResponseWriter, r *http.Request, p workflow.Principal) bool {
		key := p.ID
		if key == "" {
			key = workflow.Anonymous
		}
		d, err := l.Allow(r.Context(), key)
		if err != nil {
			if r.Context().Err() != nil {
				return false
			}
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, (&workflow.Error{Type: workflow.ExecutionError,
				Message: "the rate limiter is unavailable; retry later", Retryable: true}).Body())
			return false
		}
		d.SetHeaders(w.Header())
		if !d.Allowed {
			s.metrics.rateLimited.WithLabelValues(normalizer.ProtocolWorkflow).Inc()
			WriteRateLimited(w, d)
			return false
		}
		return true
	}
}

// workflowAPI builds the REST API over this server's publish path, task
// index, auth and limiter.
func (s *Server) workflowAPI() *workflow.API {
	api := &workflow.API{
		Executor:  s.opts.workflow,
		Submitter: wfSubmitter{s},
		Frames:    &workflow.StreamFrames{Conn: s.nc},
		Tasks:     wfTasks{s},
		Authenticate: func(r *http.Request) (workflow.Principal, error) {
			if s.opts.auth == nil {
				StripCredentialHeaders(r.Header)
				return workflow.Principal{ID: "anonymous", Origin: e2a.IdentityUser, Open: true}, nil
			}
			p, err := s.opts.auth.AuthenticateAPIKeyBearer(r) // the spec sends API keys as bearer tokens
			StripCredentialHeaders(r.Header)
			if err != nil {
				s.metrics.authFailures.WithLabelValues(normalizer.ProtocolWorkflow).Inc()
				switch {
				case errors.Is(err, ErrAuthThrottled):
					return workflow.Principal{}, errors.Join(workflow.ErrThrottled, err)
				case errors.Is(err, ErrForbidden):
					return workflow.Principal{}, errors.Join(workflow.ErrForbidden, err)
				}
				return workflow.Principal{}, errors.Join(workflow.ErrUnauthenticated, err)
			}
			return workflow.Principal{ID: p.UserID, Origin: p.IdentityOrigin, Roles: p.Roles, Open: p.Open}, nil
		},
		NewEnvelope: func(r *http.Request, p workflow.Principal, wf string) (*e2a.Envelope, error) {
			body, _ := json.Marshal(map[string]string{"workflow": wf})
			in := s.input(r, body, Principal{UserID: p.ID, IdentityOrigin: p.Origin, Roles: p.Roles, Open: p.Open}, "", nil)
			res, err := s.opts.norm.FromWorkflow(in)
			if err != nil {
				if normalizer.HTTPStatus(err) < 500 { // e.g. an Idempotency-Key outside the id grammar
					return nil, fmt.Errorf("%w: %w", workflow.ErrInvalidRequest, err)
				}
				return nil, err
			}
			return res.Envelope, nil
		},
		MaxBodyBytes: s.opts.maxBody,
	}
	if s.opts.auth != nil {
		api.Challenge = s.opts.auth.SetChallenge // the front doors' challenges, its realm
	}
	if l := s.workflowLimiter(); l != nil {
		api.RateLimits = wfLimits{l}
		api.Limit = s.workflowLimit(l)
	}
	return api
}

type wfSubmitter struct{ s *Server }

// Submit indexes the execution's executionId, then publishes it on the
// workflow pool (the routing rule's choice for a2e.workflow.execute).
func (w wfSubmitter) Submit(ctx context.Context, env *e2a.Envelope) error {
	pool := workflow.Pool
	if w.s.opts.routes != nil {
		pool = w.s.opts.routes.Pool(env)
	}
	// The envelope's user_id is the authenticated principal (or, with
	// authentication off, whoever the request claims to be).
	p := Principal{UserID: env.UserID, Open: w.s.opts.auth == nil || w.s.opts.auth.Open()}
	// The executionId is indexed before the publish, as POST /a2e does
	// (IndexExecution): an execution that cannot be indexed is not queued
	// (503, retried whole), and an accepted one is found by it.
	var undo func(context.Context) error
	if env.TaskID != "" {
		var err error
		if undo, err = (protocolHost{w.s}).IndexExecution(ctx, pool, env); err != nil {
			return err
		}
	}
	// The id is looked up whoever made it (idChosen): the workflow API
	// builds the envelope and submits it in two calls.
	acc, err := w.s.publish(ctx, p, pool, env, idChosen)
	if undo != nil && (err != nil || acc.Duplicate) {
		// Not published, or a duplicate (the request id, an
		// Idempotency-Key, already stored), answered as the first
		// submission, which indexed its own executionId: whatever
		// executionId the retry carries is not indexed against it.
		_ = undo(context.WithoutCancel(ctx)) // logs its own failure
	}
	if err == nil && acc.Duplicate && acc.Pool != pool {
		// The Idempotency-Key names a request of another pool (a tool
		// call sent to POST /a2e with it): no workflow execution, whose
		// frames would be answered as one (200 success, no results, the
		// workflow never run).
		return fmt.Errorf("%w: the request id names a request of pool %q", workflow.ErrConflict, acc.Pool)
	}
	if errors.Is(err, ErrConflict) {
		return errors.Join(workflow.ErrConflict, err)
	}
	if errors.Is(err, ErrTooLarge) {
		return errors.Join(workflow.ErrTooLarge, err)
	}
	return err
}

// indexExecution lists requestID under the workflow executionId env.TaskID
// in the task index, for env's principal (env.UserID; with authentication
// off, whoever the request claims to be), pool the pool it goes to: what
// GET /api/v1/executions/{executionId} reads. added is false when the
// record held it already. An executionId another principal holds is left
// alone, no error: the execution is accepted and answers by its request
// id; only the lookup by executionId stays with the first owner. An
// executionId naming a task of the principal's that is not a workflow
// execution (an A2A task, an E2A task_id: its record's protocol) is
// workflow.ErrNotExecution, nothing appended (turnCond.protocol):
// published, the execution would be that task's next turn.
func (s *Server) indexExecution(ctx context.Context, pool string, env *e2a.Envelope, requestID string) (added bool, err error) {
	p := Principal{UserID: env.UserID, Open: s.opts.auth == nil || s.opts.auth.Open()}
	rec, added, err := s.opts.tasks.appendAfter(ctx, KindTask, TaskRecord{ID: env.TaskID, Protocol: normalizer.ProtocolWorkflow, Pool: pool,
		Principal: env.UserID}, requestID, p.Tenant(), turnCond{protocol: normalizer.ProtocolWorkflow})
	switch {
	case errors.Is(err, ErrTaskNotFound):
		s.opts.log.Info("workflow executionId taken by another principal; not indexed", "request_id", requestID)
		return false, nil
	case errors.Is(err, errOtherProtocol):
		// Checked on the revision the append would have written:
		// nothing written, no read of its own.
		return false, fmt.Errorf("%w (a %s task)", workflow.ErrNotExecution, rec.Protocol)
	case err != nil:
		return false, err
	}
	return added, nil
}

// unindexExecution takes requestID out of the executionId id's record
// again (an execution not accepted: refused, a duplicate); its failure is
// logged, and the removal retried in the background (takeOut).
func (s *Server) unindexExecution(ctx context.Context, id, requestID string) error {
	return s.takeOut(ctx, KindTask, id, requestID, "a workflow execution not accepted (refused, or a duplicate)")
}

// IndexExecution indexes the executionId of a workflow execution POST /a2e
// is about to publish (workflow.ExecutionIndex), as the REST API's
// Submitter indexes it (indexExecution), but before the publish: an
// accepted execution is found by its executionId. One KV read and write
// (and, for an executionId never indexed, one direct get: is it an A2A
// task's?) per a2e.workflow.execute message carrying one.
func (h protocolHost) IndexExecution(ctx context.Context, pool string, env *e2a.Envelope) (func(context.Context) error, error) {
	added, err := h.s.indexExecution(ctx, pool, env, env.RequestID)
	if err != nil || !added {
		return nil, err
	}
	return func(ctx context.Context) error {
		return h.s.unindexExecution(ctx, env.TaskID, env.RequestID)
	}, nil
}

type wfTasks struct{ s *Server }

func (t wfTasks) RequestIDs(ctx context.Context, taskID string) ([]string, error) {
	rec, err := t.s.opts.tasks.Get(ctx, KindTask, taskID)
	if errors.Is(err, ErrTaskNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec.RequestIDs, nil
}

type wfLimits struct{ l *Limiter }

func (w wfLimits) Status(ctx context.Context, principal string) (*workflow.RateLimitStatus, error) {
	st, err := w.l.Status(ctx, principal)
	if err != nil {
		return nil, err
	}
	conv := func(m map[string]int) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = int64(v)
		}
		return out
	}
	return &workflow.RateLimitStatus{AgentID: st.AgentID, Limits: conv(st.Limits), Usage: conv(st.Usage), Remaining: conv(st.Remaining),
		Reset: st.Reset, Degraded: st.Degraded}, nil
}

// WorkflowAPI is the workflow API over the server (workflow.Host: the
// registry's a2e.workflow entry serves its routes), nil without
// WithWorkflow.
func (h protocolHost) WorkflowAPI() *workflow.API {
	if h.s.opts.workflow == nil {
		return nil
	}
	return h.s.workflowAPI()
}

var (
	_ workflow.Host           = protocolHost{}
	_ workflow.ExecutionIndex = protocolHost{}
)

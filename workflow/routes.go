package workflow

import (
	"context"
	"net/http"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Paths are the API's HTTP paths, which the registry's a2e.workflow entry
// declares (package protocols).
var Paths = []string{"/health", "/api/v1/capabilities", "/api/v1/workflows/validate", "/api/v1/workflows/execute",
	"/api/v1/executions/{id}", "/api/v1/rate-limit/status"}

// Host is the optional role of a host.Host that serves workflows: the API
// over its publish path, task index, authentication and limiter.
type Host interface {
	// WorkflowAPI is the API to serve; nil when workflows are not served.
	WorkflowAPI() *API
}

// ExecutionIndex is the optional role of a host.Host that indexes the
// executions it accepts by their executionId, for GET
// /api/v1/executions/{executionId} (ingress: the task index, as the REST
// API's Submitter indexes them). POST /a2e calls it for an
// a2e.workflow.execute message, whose envelope's task_id is the
// executionId (normalizer.FromA2E), just before its publish
// (host.Submission.Before).
type ExecutionIndex interface {
	// IndexExecution lists env.RequestID under the executionId env.TaskID
	// for env's principal (env.UserID), pool the pool it goes to. An
	// executionId another principal holds is left alone, nothing said:
	// only its first owner finds it. An executionId naming a task of the
	// principal's that is not a workflow execution (an A2A task) is
	// refused, nothing left indexed: ErrNotExecution. undo, nil when the index held the
	// request already (a retry), takes the request out again: when the
	// publish fails, or the request turns out to be a duplicate (an
	// Idempotency-Key used before, answered as the first request, which
	// kept its own executionId); it logs its own failure.
	IndexExecution(ctx context.Context, pool string, env *e2a.Envelope) (undo func(context.Context) error, err error)
}

// Routes are the routes of h's API ([Host]) as the registry's a2e.workflow
// entry serves them (a host.RouteServer through host.RoutesFunc): none
// when h serves no workflows.
func Routes(h host.Host) []host.Route {
	wh, ok := h.(Host)
	if !ok {
		return nil
	}
	a := wh.WorkflowAPI()
	if a == nil {
		return nil
	}
	return a.Routes()
}

// Routes are the API's routes (Register mounts them): /health,
// /api/v1/capabilities, /api/v1/workflows/validate,
// /api/v1/workflows/execute, /api/v1/executions/{id},
// /api/v1/rate-limit/status.
func (a *API) Routes() []host.Route {
	route := func(method, path string, h http.HandlerFunc) host.Route {
		return host.Route{Method: method, Path: path, Handler: h}
	}
	return []host.Route{
		route(http.MethodGet, Paths[0], a.health),
		route(http.MethodGet, Paths[1], a.auth(a.limited(a.capabilities))),
		route(http.MethodPost, Paths[2], a.auth(a.limited(a.validate))),
		route(http.MethodPost, Paths[3], a.auth(a.limited(a.execute))),
		route(http.MethodGet, Paths[4], a.auth(a.limited(a.execution))),
		route(http.MethodGet, Paths[5], a.auth(a.rateLimit)),
	}
}

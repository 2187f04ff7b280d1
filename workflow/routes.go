package workflow

import (
	"net/http"

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

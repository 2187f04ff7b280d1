package a2av1

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// A2A v1.0's `tenant` (AgentInterface.tenant, and the field of every
// request message) routes a request to one of the agents behind one
// endpoint: a client MUST send in every request the tenant of the
// interface it chose (§8.3.2). Here the tenant is the agent pool. A
// pool's card lists the gRPC binding, which has no path to carry the
// pool, with `tenant: <pool>`; a request's tenant is its pool on every
// binding, as the pool's path (/pools/<pool>/), ?agent=<pool> or the
// x-e2a-agent gRPC metadata are. So every check of a named pool applies
// to it (an invalid name, a pool no worker ever served with the pool
// check on: InvalidParams in each binding's shape), and a tenant naming
// another pool than the call's path or metadata is InvalidParams.
//
// The calls on a task (GetTask, ListTasks, CancelTask, SubscribeToTask,
// the push-config methods) check it the same way (readCall): an invalid pool name, or a tenant
// naming another pool than the interface's, is InvalidParams. The pool
// does not scope the calls that name a task: a task is its principal's
// under the ownership rule, whichever pool ran it (its id names it on
// every interface, as ?agent= and the pool's path have always allowed),
// and a pool no worker serves now keeps its tasks readable, so whether a
// pool is known is a send's check only. ListTasks, which names no task,
// lists the named pool's tasks only: a client given a pool's card talks
// to that agent and lists its tasks with it, not those of the pipeline's
// other agents; the pipeline's own interface, naming no pool, lists every
// pool's.
//
// The HTTP+JSON binding carries the tenant in the path too: a2a.proto's
// HTTP annotations give every route an additional binding under
// `/{tenant}` (`/{tenant}/message:send`, `/{tenant}/tasks/{id}` ...), and
// a client sends a tenanted interface's calls there. A route without
// that segment and without a body of "*" (the GETs, the DELETE) carries
// the tenant in its query (?tenant=), which the gateway reads into the
// request; one whose body is "*" carries it in its body, which the SDK's
// handler reads but for a cancel's (cancelTenant). restCall takes the
// path's (its prefix off the path; it wins, as the gateway's route of it
// sets the field from the path and filters the query's out), else a
// cancel's body's, else the query's, and makes it the call's pool, as
// ?agent= would.

// callFor is call, with the request's tenant as the call's pool.
func (h *handler) callFor(ctx context.Context, tenant string) (call, error) {
	c, err := h.call(ctx)
	if err != nil || tenant == "" {
		return c, err
	}
	if c.agent != "" && c.agent != tenant {
		return c, tenantMismatch(tenant, c.agent)
	}
	c.agent = tenant
	return c, nil
}

// readCall is callFor for a call on the caller's tasks: the call's pool
// (the tenant, else the interface's) must be a valid pool name
// (host.ErrInvalidPool: InvalidParams). It does not scope the read (the
// package comment).
func (h *handler) readCall(ctx context.Context, tenant string) (call, error) {
	if cc, ok := callFrom(ctx); ok && tenant == "" && cc.protoTenant != nil {
		tenant = *cc.protoTenant // a gRPC request's, which the SDK dropped
	}
	c, err := h.callFor(ctx, tenant)
	if err != nil || c.agent == "" || normalizer.ValidPool(c.agent) {
		return c, err
	}
	return c, sdkError(fmt.Errorf("%w: %.80q is not a valid agent pool name", host.ErrInvalidPool, c.agent))
}

// sendTenant is req's tenant ("" for no request).
func sendTenant(req *a2a.SendMessageRequest) string {
	if req == nil {
		return ""
	}
	return req.Tenant
}

// cancelTenant is the tenant of the body of an HTTP+JSON CancelTask
// (method on route, pathTenant: the path had one), a2a.proto's POST
// /tasks/{id}:cancel with body "*": the gateway reads the request's
// tenant from the body, which the SDK's handler does not read. "" for
// another call, a cancel with a path tenant (the gateway's route of
// `/{tenant}/…` sets the field from the path, over the body's) or a body
// without one; InvalidParams for a tenant that is no string. (The other
// routes whose body is "*", message:send, message:stream and a push
// config's creation, have their body's tenant read by the SDK's handler,
// which checks it: callFor, readCall.)
func cancelTenant(method, route string, pathTenant bool, body []byte) (string, error) {
	if _, ok := restCancelTask(method, route); !ok || pathTenant || len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m["tenant"] == nil {
		return "", nil // no object: the SDK's handler reads no body
	}
	var tenant string
	if err := json.Unmarshal(m["tenant"], &tenant); err != nil {
		return "", decodeError("tenant", err) // "tenant must be a string, not a number"
	}
	return tenant, nil
}

// tenantMismatch is the InvalidParams of a tenant naming another pool
// than the interface's.
func tenantMismatch(tenant, agent string) error {
	return fmt.Errorf("%w: tenant %q names another agent pool than this interface's (%q)", a2a.ErrInvalidParams, tenant, agent)
}

// restRouteHeads are the first path segments of the HTTP+JSON binding's
// routes (a2a.proto): a path under Path that starts with one has no
// tenant. (So a pool named "tasks" or "extendedAgentCard" cannot be a
// path tenant; ?agent= and the pool's path still name it.)
var restRouteHeads = map[string]bool{"message:send": true, "message:stream": true, "tasks": true, "extendedAgentCard": true}

// pathTenant splits an HTTP+JSON path into its `/{tenant}` prefix and the
// route's path under Path without it; tenant is "" for a path without
// one (or none of the binding's routes: the SDK answers it).
func pathTenant(path string) (tenant, route string) {
	sub, ok := strings.CutPrefix(path, Path+"/")
	if !ok {
		return "", path
	}
	seg, rest, found := strings.Cut(sub, "/")
	if !found || seg == "" || restRouteHeads[seg] {
		return "", path
	}
	if head, _, _ := strings.Cut(rest, "/"); !restRouteHeads[head] {
		return "", path
	}
	return seg, Path + "/" + rest
}

// restCall reads an HTTP+JSON call's query as the gateway reads it
// (restQuery) and takes its tenant (its path's, else a cancel's body's,
// else its query's) as the call's pool, as ?agent= would, the path tenant
// off its path; it reports whether the call goes on. A query the gateway
// refuses, and a tenant naming another pool than the interface's (the
// pool's path, or ?agent=), are answered InvalidParams here.
func restCall(w http.ResponseWriter, r **http.Request, body []byte) bool {
	tenant, route := pathTenant((*r).URL.Path)
	bodyTenant, err := cancelTenant((*r).Method, route, tenant != "", body)
	if err != nil {
		id, _ := restCancelTask((*r).Method, route)
		writeREST(w, restTaskError(err, id))
		return false
	}
	if tenant == "" && bodyTenant == "" && (*r).URL.RawQuery == "" {
		return true
	}
	q, id, queryTenant, changed, err := restQuery((*r).Method, route, (*r).URL.RawQuery, tenant != "")
	if err != nil {
		writeREST(w, restTaskError(err, id))
		return false
	}
	tenant = cmp.Or(tenant, bodyTenant, queryTenant)
	if tenant != "" {
		if agent := q.Get("agent"); agent != "" && agent != tenant {
			writePlain(w, tenantMismatch(tenant, agent), nil, true)
			return false
		}
		q.Set("agent", tenant)
	}
	if tenant == "" && !changed {
		return true
	}
	r2 := (*r).Clone((*r).Context())
	r2.URL.RawQuery = q.Encode()
	if route != r2.URL.Path {
		r2.URL.Path, r2.URL.RawPath = route, ""
	}
	r2.RequestURI = r2.URL.RequestURI()
	*r = r2
	return true
}

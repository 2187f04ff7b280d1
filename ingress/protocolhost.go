package ingress

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// The protocol packages' side of the front door: a protocol that is one
// package (protocols/<name>) is mounted from the registry, its routes built
// over protocolHost, the server as host.Host.

// mountProtocols mounts the routes of every registered protocol package on
// mux, each request counted in e2a_ingress_requests_total under the
// protocol's name and the route; other methods on a route's path are 405.
func (s *Server) mountProtocols(mux *http.ServeMux) {
	h := protocolHost{s: s}
	paths := map[string]bool{}
	for _, p := range protocols.All() {
		if p.Routes == nil {
			continue
		}
		for _, rt := range p.Routes(h) {
			pattern := rt.Method + " " + rt.Path
			mux.Handle(pattern, s.counted(p.Name, pattern, rt.Handler))
			if !paths[rt.Path] {
				paths[rt.Path] = true
				mux.HandleFunc(rt.Path, egress.MethodNotAllowed(rt.Method))
			}
		}
	}
}

// counted counts every answer of h in the requests metric.
func (s *Server) counted(protocol, route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() { s.metrics.requests.WithLabelValues(protocol, route, strconv.Itoa(rec.code)).Inc() }()
		h.ServeHTTP(rec, r)
	})
}

// protocolHost is the server as the protocol packages' host.
type protocolHost struct{ s *Server }

var _ host.Host = protocolHost{}

// Admit is the gate.
func (h protocolHost) Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.Caller, bool) {
	p, ok := h.s.gate(w, r, protocol, refuse)
	if !ok {
		return nil, false
	}
	return caller{s: h.s, p: p}, true
}

// Serve answers from the request's frames with egress.
func (h protocolHost) Serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer egress.NewRenderer) {
	h.s.egress.Serve(w, r, requestID, format, newRenderer)
}

// Normalizer is the server's normalizer.
func (h protocolHost) Normalizer() *normalizer.Normalizer { return h.s.opts.norm }

// MaxBody is WithMaxBody's bound.
func (h protocolHost) MaxBody() int64 { return h.s.opts.maxBody }

// Version is the server's Version.
func (h protocolHost) Version() string { return Version }

// caller is a principal the gate admitted.
type caller struct {
	s *Server
	p Principal
}

var _ host.Caller = caller{}

// Input is the server's input for the principal.
func (c caller) Input(r *http.Request, body []byte, agent string) normalizer.Input {
	return c.s.input(r, body, c.p, agent)
}

// Publish is the server's publish (the publish metric observed), its
// errors matching the host's sentinels too.
func (c caller) Publish(ctx context.Context, pool string, env *e2a.Envelope) (host.Accepted, error) {
	start := time.Now()
	acc, err := c.s.publish(ctx, c.p, pool, env)
	c.s.metrics.publish.Observe(time.Since(start).Seconds())
	return host.Accepted{RequestID: acc.RequestID, Pool: acc.Pool, Duplicate: acc.Duplicate, Warning: acc.Warning}, hostError(err)
}

// hostKinds pairs the front door's sentinel errors with the host's.
var hostKinds = []struct{ ingress, host error }{
	{ErrUnknownPool, host.ErrUnknownPool},
	{ErrConflict, host.ErrConflict},
	{ErrTooLarge, host.ErrTooLarge},
	{ErrBackpressure, host.ErrBackpressure},
}

// hostError returns err matching the host's sentinel of its kind as well,
// with its text unchanged.
func hostError(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range hostKinds {
		if errors.Is(err, k.ingress) {
			return kindError{err: err, kind: k.host}
		}
	}
	return err
}

// kindError is an error of the front door that also matches a host
// sentinel.
type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }

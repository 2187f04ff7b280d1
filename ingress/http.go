package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// writeJSON writes v with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is the JSON error shape of the E2A HTTP API:
// {"error":{"code":"...","message":"...","retryable":false}} (egress's,
// which protocols/e2a writes for POST /v1/requests).
type ErrorBody = egress.APIError

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail = egress.APIErrorBody

// statusRecorder is the answer's status (obs.StatusWriter) and the request
// it published, for the request's metric and log line.
type statusRecorder struct {
	obs.StatusWriter
	requestID string // the request published, for the log line
}

// logRequest writes the Debug line of an HTTP request ingress answered
// (every door: REST, JSON-RPC with its method as rpc, A2E): method, path,
// code, duration and the request it published (the last one of a call;
// none for a batch), with more attributes of the door's.
func logRequest(log *slog.Logger, r *http.Request, code int, start time.Time, requestID string, more ...slog.Attr) {
	if !log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	attrs := append([]slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("code", code), slog.Duration("dur", time.Since(start)),
		slog.String("request_id", requestID)}, more...)
	log.LogAttrs(r.Context(), slog.LevelDebug, "http", attrs...)
}

// probeMethods are the methods unrouted asks the mux about to fill a
// 405's Allow.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete}

// unrouted answers a request no other pattern of mux takes (Register
// mounts it at "/"): the ServeMux's own answers are text/plain ("404 page
// not found", "Method Not Allowed"), which no client of a JSON API reads.
// A path mux serves for other methods is 405 with those in Allow, any
// other 404, both in the E2A error object.
func unrouted(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range probeMethods {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			egress.MethodNotAllowed(allow...)(w, r)
			return
		}
		e2aproto.WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: GET / lists them", false)
	}
}

// requestRefusal is the gate's refusal of a request every door reads the
// same way (nil: none): a query that is no URL-encoded form
// (host.ReadQuery: ?agent=ec%zzho, ?agent=echo;x), refused whole, 400
// invalid_request, JSON-RPC -32602 (the doors' code for a bad ?agent=),
// its message naming what is wrong: URL.Query() dropped such a pair and,
// with it, the pool the client named, so another pool's agent answered;
// a query parameter given twice with different values (?agent=a&agent=b:
// the doors read the first, so the pool chosen was not the client's
// whole say), 400 invalid_request, -32602 as well; a ?agent= naming
// another pool than the /pools/<pool>/ path the request came by (the mount
// leaves it for this check: it was silently the path's pool), the same; and a body whose Content-Type is not
// one the door of protocol p reads (bodyTypeOK), refused 415 with p's
// JSON-RPC code for it (protocols.Protocol.MediaTypeCode).
// checked: the door refuses a non-JSON Content-Type itself (A2A v1.0's
// bindings), so only what it reads and a browser may send cross-site (no
// Content-Type, a form) is refused here. A body with a content coding
// (Content-Encoding other than identity: no door decodes one) is refused
// 415 too, with Accept-Encoding: identity set in h (RFC 9110 §15.5.16): it
// was read as it came, a gzip body answered with a parse error ("not
// valid UTF-8"), and a body labelled br but sent plain accepted.
func requestRefusal(r *http.Request, h http.Header, p protocols.Protocol, checked bool) *failure {
	q, err := host.ReadQuery(r.URL.RawQuery)
	if err != nil {
		return &failure{Status: http.StatusBadRequest, Code: "invalid_request", RPCCode: jsonrpc.CodeInvalidParams,
			Message: err.Error()}
	}
	if name := egress.RepeatedParam(q); name != "" {
		return &failure{Status: http.StatusBadRequest, Code: "invalid_request", RPCCode: jsonrpc.CodeInvalidParams,
			Message: "query parameter " + strconv.Quote(name) + " is given twice with different values"}
	}
	if pool, ok := poolFromContext(r.Context()); ok && namesOtherPool(q, pool) {
		return &failure{Status: http.StatusBadRequest, Code: "invalid_request", RPCCode: jsonrpc.CodeInvalidParams,
			Message: "the path names pool " + strconv.Quote(pool) + " and ?agent= names " + strconv.Quote(q.Get("agent")) + ": name one"}
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil
	}
	if r.ContentLength == 0 {
		return nil // no body to read wrongly (a cancel, say)
	}
	code := cmp.Or(p.MediaTypeCode, jsonrpc.CodeInvalidRequest)
	if ce := egress.ContentCoding(r); ce != "" {
		h.Set("Accept-Encoding", "identity")
		return &failure{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", RPCCode: code,
			Message: "Content-Encoding " + strconv.Quote(ce) + " is not supported: send the body without a content coding"}
	}
	if bodyTypeOK(r, p.BodyTypes) || checked && r.Header.Get("Origin") == "" {
		return nil
	}
	want := "application/json"
	if len(p.BodyTypes) > 0 {
		want = p.BodyTypes[0]
	}
	return &failure{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", RPCCode: code,
		Message: "Content-Type " + strconv.Quote(r.Header.Get("Content-Type")) + " is not supported: send the body as " + want}
}

// bodyTypeOK reports whether r's Content-Type is one a door reads: JSON
// (application/json, application/*+json: A2A's JSON-RPC and HTTP+JSON
// bindings, ACP over HTTP, E2A), or one of its protocol's other types
// (A2E's NDJSON). A body with no Content-Type, or
// application/x-www-form-urlencoded (what curl -d sends when told
// nothing, as the README's examples do), is read only when no browser
// sent it: a browser posts those cross-site without a CORS preflight (a
// form, a no-cors fetch), and always names the page's Origin on a POST;
// any other type (text/plain, multipart/form-data) is refused whoever
// sends it.
func bodyTypeOK(r *http.Request, others []string) bool {
	ct := strings.TrimSpace(r.Header.Get("Content-Type"))
	if ct == "" {
		return r.Header.Get("Origin") == ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return false
	case mt == "application/json", strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return true
	case mt == "application/x-www-form-urlencoded":
		return r.Header.Get("Origin") == ""
	}
	return slices.Contains(others, mt)
}

type bodyCheckedKey struct{}

// withBodyChecked marks a request's context: its door checks the
// Content-Type itself (requestRefusal).
func withBodyChecked(ctx context.Context) context.Context {
	return context.WithValue(ctx, bodyCheckedKey{}, true)
}

func bodyChecked(ctx context.Context) bool { v, _ := ctx.Value(bodyCheckedKey{}).(bool); return v }

// bounded serves h with a body whose declared length (Content-Length)
// passes the body bound (WithMaxBodyBytes) answered unread: its reads
// fail at once with the *http.MaxBytesError a door's http.MaxBytesReader
// gives past the bound, so the door answers its own 413 before any of
// the body is read, and net/http never sends the 100 Continue an `Expect:
// 100-continue` asked for (it does at the body's first read), nor waits
// for content the client may not send before it (RFC 9110 §10.1.1). h
// gets a copy of r: net/http decides by the body of its own r whether the
// connection is closed after the answer (an unsent 100 Continue, or more
// than 256 KiB left unread) or the rest discarded, which it would read
// from the client, asking for it, had that body been replaced. A body of
// unknown length (chunked) is bounded as it is read.
func (s *Server) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.opts.maxBody {
			r = r.WithContext(r.Context())
			r.Body = overBound{limit: s.opts.maxBody}
		}
		h.ServeHTTP(w, r)
	})
}

// overBound is a request body declared longer than limit: a read is the
// error of a body read past it; the server closes the body it read none
// of.
type overBound struct{ limit int64 }

func (b overBound) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: b.limit} }

func (overBound) Close() error { return nil }

package host

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// A cancel (A2A v0.3 tasks/cancel, v1.0 CancelTask, ACP session/cancel: a
// call that cancels a request of its caller) stays possible while its
// caller is over its rate limit: the gate admits it on the principal's
// budget of cancels when the rate limit refuses it (ingress/AUTH.md, "Rate
// limits"). The door says which calls are cancels, the gate asks only when
// the rate limit refused the call: a JSON-RPC door with
// [RPCEndpoint.Cancels], an SDK binding's call by [WithCancel] on the
// context it admits.

// MaxCancelBody bounds the body of a JSON-RPC call read as a cancel
// ([IsCancelCall], [PeekBody]): a cancel names a task or a session, and a
// larger body is never taken for one (it is charged as any call).
const MaxCancelBody = 64 << 10

type cancelKey struct{}

// WithCancel returns ctx marking its call as a cancel when test reports
// true. The gate runs test only when the caller's rate limit refused the
// call, at most once, before anything of the call is read by its handler:
// test may read a bounded part of the body ([PeekBody]) if it restores it.
func WithCancel(ctx context.Context, test func() bool) context.Context {
	return context.WithValue(ctx, cancelKey{}, test)
}

// CancelTest returns the test [WithCancel] put on ctx, nil when none.
func CancelTest(ctx context.Context) func() bool {
	f, _ := ctx.Value(cancelKey{}).(func() bool)
	return f
}

// IsCancelCall reports whether body is one JSON-RPC 2.0 call (not a
// batch, even of cancels alone), valid as a request or notification, of a
// method isCancel accepts, its params an object, within [MaxCancelBody]:
// a batch that mixes a cancel with other calls, or a body that names a
// cancel and is not a valid call, is not a cancel.
func IsCancelCall(body []byte, isCancel func(method string) bool) bool {
	if isCancel == nil || len(body) > MaxCancelBody {
		return false
	}
	req, ok := oneCall(body)
	return ok && IsCancelRequest(req, isCancel)
}

// IsOpenCall reports whether body is one JSON-RPC 2.0 call with an id (not
// a batch, not a notification), valid, of a method open accepts
// ([RPCEndpoint.Open]), its params an object, within [MaxRefusalBody].
func IsOpenCall(body []byte, open func(method string) bool) bool {
	if open == nil || len(body) > MaxRefusalBody {
		return false
	}
	req, ok := oneCall(body)
	return ok && !req.IsNotification() && callOf(req, open)
}

// oneCall is the call of body when body is one valid JSON-RPC 2.0 call
// (not a batch).
func oneCall(body []byte) (*jsonrpc.Request, bool) {
	calls, batch, err := jsonrpc.Decode(body, jsonrpc.DecodeOptions{})
	if err != nil || batch || len(calls) != 1 || calls[0].Err != nil {
		return nil, false
	}
	return &calls[0].Request, true
}

// IsCancelRequest reports whether req, a valid JSON-RPC request, is a call
// of a method isCancel accepts, its params an object.
func IsCancelRequest(req *jsonrpc.Request, isCancel func(method string) bool) bool {
	return callOf(req, isCancel)
}

// callOf reports whether req is a call of a method accept accepts, its
// params an object.
func callOf(req *jsonrpc.Request, accept func(method string) bool) bool {
	if accept == nil || !accept(req.Method) {
		return false
	}
	p := bytes.TrimLeft(req.Params, " \t\r\n")
	return len(p) > 0 && p[0] == '{'
}

// PeekBody reads at most limit+1 bytes of r's body and puts them back in
// front of the rest, so that r's handler reads the whole body as sent. It
// returns what it read and whether that is the whole body (at most limit
// bytes); a body it could not read is returned as not whole.
func PeekBody(r *http.Request, limit int64) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = peekedBody{Reader: io.MultiReader(bytes.NewReader(b), r.Body), Closer: r.Body}
	return b, err == nil && int64(len(b)) <= limit
}

// MaxRefusalBody bounds what a refusal of a call the gate did not admit
// reads of its body ([RefusalBody]).
const MaxRefusalBody = 64 << 10

// RefusalBody reads r's body for a refusal of a call the gate did not
// admit (the id of its call, the protocol's shape), the credential checked
// before: only a body whose length is declared (Content-Length), at most
// limit and [MaxRefusalBody], which net/http reads anyway to keep the
// connection; nil for another, left unread: a body of unknown length may
// never end, and one larger is not read for a caller that may not send it.
func RefusalBody(r *http.Request, limit int64) []byte {
	n := r.ContentLength
	if r.Body == nil || r.Body == http.NoBody || n <= 0 || n > min(limit, MaxRefusalBody) {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, n))
	if err != nil {
		return nil
	}
	return b
}

// CloseUnread closes the connection after a refusal of r that left its
// body unread (Connection: close in h) when the body has no declared
// length (HTTP/1.1 chunked): net/http reads a body left unread before it
// answers, to keep the connection, and one that never ends would hold the
// refusal back. A body of a declared length it reads (at most 256 KiB; a
// larger one closes the connection), or, with Expect: 100-continue,
// leaves unread.
func CloseUnread(h http.Header, r *http.Request) {
	if r.ProtoMajor == 1 && r.ContentLength < 0 {
		h.Set("Connection", "close")
	}
}

// peekedBody is a body of which PeekBody read the start: that start, then
// the rest, closed as the original.
type peekedBody struct {
	io.Reader
	io.Closer
}

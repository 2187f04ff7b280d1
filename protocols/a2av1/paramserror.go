package a2av1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// paramsErrorWriter passes the SDK's JSON-RPC answer to a call whose body
// is valid JSON (checkCall read it) through, but for a -32700 Parse error:
// the SDK answers every params decode error but a Go type mismatch so (a
// part with no content or two, raw bytes not base64, a timestamp that is
// none), where A2A v1.0 says -32700 is "the server received invalid JSON"
// and a request that does not validate is -32602 Invalid params (§3.3.2,
// §9.5's example of a bad message.parts). The a2a-go client read it as
// ErrParseError. A decode error's answer (-32700, or the SDK's -32602 for
// a member of the wrong JSON type, which named Go's types) says what was
// wrong in JSON's words (decodeError: the params decoded again into the
// method's request); the handler's own -32602 passes through. The SDK
// writes an answer in one Write (its encoder's); only one that names
// PARSE_ERROR or INVALID_PARAMS is decoded.
type paramsErrorWriter struct {
	passThrough
	seen bool
	// method and params are the call's, decoded again on an error answer.
	method string
	params json.RawMessage
}

func (w *paramsErrorWriter) Write(b []byte) (int, error) {
	if w.seen {
		return w.ResponseWriter.Write(b)
	}
	w.seen = true
	if !bytes.HasPrefix(b, []byte(`{"jsonrpc":`)) ||
		!bytes.Contains(b, []byte(`"PARSE_ERROR"`)) && !bytes.Contains(b, []byte(`"INVALID_PARAMS"`)) {
		return w.ResponseWriter.Write(b)
	}
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &resp) != nil || resp.Error == nil ||
		resp.Error.Code != jsonrpc.CodeParseError && resp.Error.Code != jsonrpc.CodeInvalidParams {
		return w.ResponseWriter.Write(b)
	}
	answer := fmt.Errorf("%w: %s", a2a.ErrInvalidParams, strings.TrimPrefix(resp.Error.Message, a2a.ErrParseError.Error()+": "))
	if err := decodeAgain(w.params, paramsTarget(w.method)); err != nil {
		answer = decodeError("params", err)
	} else if resp.Error.Code == jsonrpc.CodeInvalidParams {
		return w.ResponseWriter.Write(b) // the handler's, in its words
	}
	out, err := json.Marshal(jsonrpc.ErrorResponse(resp.ID, Error(answer)))
	if err != nil {
		return w.ResponseWriter.Write(b)
	}
	if _, err := w.ResponseWriter.Write(append(out, '\n')); err != nil {
		return 0, err
	}
	return len(b), nil
}

// passThrough is what a writer wrapping the SDK's answers passes on
// untouched: Flush and Unwrap keep what it wraps reachable (the SDK's
// streams, http.ResponseController's deadlines), FlushError a flush's
// error (ResponseController takes Flush alone for one that cannot fail:
// a stream cut off as a slow client during a flush was counted a client
// gone).
type passThrough struct{ http.ResponseWriter }

func (w passThrough) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w passThrough) FlushError() error { return http.NewResponseController(w.ResponseWriter).Flush() }

func (w passThrough) Unwrap() http.ResponseWriter { return w.ResponseWriter }

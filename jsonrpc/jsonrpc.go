package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// Response is a JSON-RPC 2.0 response object: exactly one of
// Result and Error is written (result null when Result is nil), and ID nil
// is written as null.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var jsonNull = json.RawMessage("null")

// MarshalJSON writes "result" (null when Result is nil) unless Error is set,
// and "id" null when ID is nil, as the specification requires.
func (r Response) MarshalJSON() ([]byte, error) {
	id := r.ID
	if len(id) == 0 {
		id = jsonNull
	}
	if r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *Error          `json:"error"`
		}{"2.0", id, r.Error})
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, r.Result})
}

// Notification is a JSON-RPC 2.0 notification (no id).
type Notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// Error is the error member of a JSON-RPC response. It implements
// error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return "jsonrpc " + strconv.Itoa(e.Code) + ": " + e.Message
}

// Defaults of DecodeOptions.
const (
	DefaultMaxJSONDepth = 64
	DefaultMaxBatch     = 100
)

// Request is one JSON-RPC 2.0 request or notification.
//
// ID is the raw id exactly as received: nil when the member was absent (a
// notification), the bytes "null" for an explicit null, else a JSON string
// or number. Params is nil when absent (or null), else a JSON object or
// array.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// IsNotification reports whether r carries no id and so must get no reply.
func (r *Request) IsNotification() bool { return r.ID == nil }

// ValidID reports whether raw is a JSON-RPC 2.0 id: one JSON value that
// is a string, a number or null (white space around it allowed). The
// doors that read an id before Decode (to answer a refusal to it) use it.
func ValidID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
		var v any
		return json.Unmarshal(raw, &v) == nil
	}
	return false
}

// ResultResponse returns the success response to id.
func ResultResponse(id json.RawMessage, result any) Response {
	return Response{JSONRPC: "2.0", ID: id, Result: result}
}

// ErrorResponse returns the error response to id (nil id: null).
func ErrorResponse(id json.RawMessage, e *Error) Response {
	return Response{JSONRPC: "2.0", ID: id, Error: e}
}

// ParseError returns a -32700 error.
func ParseError(msg string) *Error {
	return &Error{Code: CodeParseError, Message: "Parse error: " + msg}
}

// InvalidRequest returns a -32600 error.
func InvalidRequest(msg string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "Invalid Request: " + msg}
}

// MethodNotFound returns the -32601 error for method.
func MethodNotFound(method string) *Error {
	return &Error{Code: CodeMethodNotFound, Message: "Method not found: " + QuoteForMessage(method)}
}

// InvalidParams returns a -32602 error.
func InvalidParams(msg string) *Error {
	return &Error{Code: CodeInvalidParams, Message: "Invalid params: " + msg}
}

// InternalError returns a -32603 error. msg must not reveal internals or
// secrets; it is sent to the client.
func InternalError(msg string) *Error {
	return &Error{Code: CodeInternalError, Message: "Internal error: " + msg}
}

// QuoteForMessage quotes s for an error message, cut to 128 bytes at a
// character's start: a client-chosen name echoed back can never make the
// answer large (nor end in half a character).
func QuoteForMessage(s string) string {
	const max = 128
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

// DecodeOptions bounds what Decode accepts. Zero fields take the
// defaults.
type DecodeOptions struct {
	// MaxDepth bounds nesting of arrays and objects in the whole body,
	// counting the batch array and the request object. Default 64.
	MaxDepth int
	// MaxBatch bounds the number of elements of a batch. Default 100.
	MaxBatch int
}

func (o DecodeOptions) withDefaults() DecodeOptions {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxJSONDepth
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	return o
}

// Call is one element of a decoded body. When Err is nil, Request is a valid
// request or notification. When Err is set (always -32600), the element was
// not a valid Request object and must be answered with
// ErrorResponse(Request.ID, Err); Request.ID is the element's id when it was
// valid, else nil (written as null).
type Call struct {
	Request Request
	Err     *Error
}

// Decode decodes a request body into one call (batch false) or the
// elements of a batch (batch true, at least one element).
//
// A non-nil *Error concerns the whole body and must be answered alone, with
// id null: -32700 for a body that is not JSON (or not valid UTF-8), -32600 for a body that is
// neither an object nor an array, an empty array, a batch larger than
// MaxBatch, or nesting deeper than MaxDepth.
func Decode(body []byte, opts DecodeOptions) (calls []Call, batch bool, err *Error) {
	opts = opts.withDefaults()
	if !utf8.Valid(body) {
		// encoding/json would replace the bad bytes with U+FFFD.
		return nil, false, ParseError("the body is not valid UTF-8")
	}
	if !jsonstr.Valid(body) {
		if opts.MaxDepth < 10000 && jsonstr.ValidAnyDepth(body) {
			// Valid JSON nested past encoding/json's 10,000 levels.
			return nil, false, InvalidRequest(fmt.Sprintf("JSON nesting exceeds %d levels", opts.MaxDepth))
		}
		return nil, false, ParseError("the body is not valid JSON")
	}
	// jsonstr.Valid (json.Valid, faster) is an iterative scanner; only after it has passed do we
	// measure depth (over valid JSON, so strings are delimited correctly),
	// and only then decode.
	if jsonstr.Deeper(body, opts.MaxDepth) {
		return nil, false, InvalidRequest(fmt.Sprintf("JSON nesting exceeds %d levels", opts.MaxDepth))
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch trimmed[0] {
	case '{':
		return []Call{decodeCall(trimmed)}, false, nil
	case '[':
		var elems []json.RawMessage
		if e := json.Unmarshal(trimmed, &elems); e != nil {
			return nil, false, ParseError("the body is not valid JSON")
		}
		if len(elems) == 0 {
			return nil, true, InvalidRequest("empty batch")
		}
		if len(elems) > opts.MaxBatch {
			return nil, true, InvalidRequest(fmt.Sprintf("batch of %d requests exceeds the limit of %d", len(elems), opts.MaxBatch))
		}
		calls = make([]Call, len(elems))
		for i, el := range elems {
			calls[i] = decodeCall(el)
		}
		return calls, true, nil
	default:
		return nil, false, InvalidRequest("a request must be a JSON object or an array of them")
	}
}

// decodeCall validates one element (valid JSON, depth already checked).
func decodeCall(el json.RawMessage) Call {
	el = bytes.TrimSpace(el)
	if len(el) == 0 || el[0] != '{' {
		return Call{Err: InvalidRequest("a request must be a JSON object")}
	}
	if c, ok := scanCall(el); ok {
		return c
	}
	return decodeCallMap(el)
}

// decodeCallMap is decodeCall through encoding/json, for any shape.
func decodeCallMap(el json.RawMessage) Call {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(el, &m); err != nil {
		return Call{Err: InvalidRequest("a request must be a JSON object")}
	}
	var c Call
	// The id first, so that later errors can echo it.
	if raw, ok := m["id"]; ok {
		raw = bytes.TrimSpace(raw)
		switch raw[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			c.Request.ID = compactID(raw)
		default:
			return Call{Err: InvalidRequest("id must be a string, a number or null")}
		}
	}
	fail := func(msg string) Call {
		c.Err = InvalidRequest(msg)
		return c
	}
	v, ok := m["jsonrpc"]
	if !ok {
		return fail(`missing "jsonrpc": "2.0"`)
	}
	var version string
	if json.Unmarshal(v, &version) != nil || version != "2.0" {
		return fail(`"jsonrpc" must be exactly "2.0"`)
	}
	c.Request.JSONRPC = version
	mv, ok := m["method"]
	if !ok {
		return fail(`missing "method"`)
	}
	if json.Unmarshal(mv, &c.Request.Method) != nil {
		return fail(`"method" must be a string`)
	}
	if c.Request.Method == "" {
		return fail(`"method" must not be empty`)
	}
	if p, ok := m["params"]; ok {
		p = bytes.TrimSpace(p)
		switch p[0] {
		case '{', '[':
			c.Request.Params = p
		case 'n': // null: read as absent
		default:
			return fail(`"params" must be an object or an array`)
		}
	}
	return c
}

// scanCall is decodeCall for a well-formed request written plainly (el is
// valid JSON, an object): its members read from their bytes instead of a
// map and three reflective decodes. ok is false for anything else (a key or
// a jsonrpc or method string with escapes or invalid UTF-8, a member of the
// wrong type, one missing), which decodeCall then reads as before, errors included
// (TestScanCallMatches).
func scanCall(el []byte) (c Call, ok bool) {
	var id, version, method, params []byte
	if !jsonstr.Members(el, func(key, val []byte) bool {
		switch string(key) {
		case "id":
			id = val
		case "jsonrpc":
			version = val
		case "method":
			method = val
		case "params":
			params = val
		}
		return true
	}) {
		return c, false
	}
	if id != nil {
		switch id[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			c.Request.ID = compactID(id)
		default:
			return c, false
		}
	}
	if string(version) != `"2.0"` || len(method) < 3 || method[0] != '"' ||
		bytes.IndexByte(method, '\\') >= 0 || !utf8.Valid(method) {
		return c, false
	}
	c.Request.JSONRPC = "2.0"
	c.Request.Method = string(method[1 : len(method)-1])
	if params != nil {
		switch params[0] {
		case '{', '[':
			c.Request.Params = append(json.RawMessage(nil), params...)
		case 'n':
		default:
			return Call{}, false
		}
	}
	return c, true
}

// compactID returns the id without insignificant whitespace (ids are scalars,
// so TrimSpace suffices) as its own copy.
func compactID(raw json.RawMessage) json.RawMessage {
	return append(json.RawMessage(nil), raw...)
}

// WriteResponse writes one response as the whole HTTP answer (200,
// application/json). JSON-RPC errors use HTTP 200 too, as the AgentVault
// profile and the A2A JSON-RPC binding expect.
func WriteResponse(w http.ResponseWriter, resp Response) error {
	data, err := json.Marshal(resp)
	if err != nil {
		data, _ = json.Marshal(ErrorResponse(resp.ID, InternalError("the result could not be encoded")))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, werr := w.Write(append(data, '\n'))
	if err != nil {
		return err
	}
	return werr
}

// WriteResult writes the success response to id.
func WriteResult(w http.ResponseWriter, id json.RawMessage, result any) error {
	return WriteResponse(w, ResultResponse(id, result))
}

// WriteError writes the error response to id (nil: null).
func WriteError(w http.ResponseWriter, id json.RawMessage, e *Error) error {
	return WriteResponse(w, ErrorResponse(id, e))
}

// WriteNoReply ends an HTTP exchange that has nothing to answer (a
// notification, or a batch of notifications): 204 No Content.
func WriteNoReply(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNoContent)
}

// Handler answers one valid, non-streaming request: a result, or an
// error. It is also called for notifications, a streaming method's too,
// whose answer is dropped.
type Handler func(ctx context.Context, req *Request) (result any, err *Error)

// Batch answers the calls of a batch one after another, in order:
// invalid elements get their -32600, elements whose method isStreaming
// reports true get a -32600 saying streaming methods cannot be batched, the
// others are passed to h. Notifications are run but get no response, a
// streaming method's too (it has no stream to answer, as when it is sent
// alone; refusing it would drop it without a word). The
// result may be empty (all notifications): then nothing must be written but
// an empty HTTP answer (see WriteNoReply).
func Batch(ctx context.Context, calls []Call, isStreaming func(method string) bool, h Handler) []Response {
	out := make([]Response, 0, len(calls))
	for i := range calls {
		c := &calls[i]
		if c.Err != nil {
			out = append(out, ErrorResponse(c.Request.ID, c.Err))
			continue
		}
		if isStreaming != nil && isStreaming(c.Request.Method) && !c.Request.IsNotification() {
			out = append(out, ErrorResponse(c.Request.ID, &Error{
				Code:    CodeInvalidRequest,
				Message: "Invalid Request: streaming method " + QuoteForMessage(c.Request.Method) + " cannot be part of a batch; send it alone",
			}))
			continue
		}
		res, rerr := h(ctx, &c.Request)
		if c.Request.IsNotification() {
			continue
		}
		if rerr != nil {
			out = append(out, ErrorResponse(c.Request.ID, rerr))
		} else {
			out = append(out, ResultResponse(c.Request.ID, res))
		}
	}
	return out
}

// WriteBatch writes the responses of a batch (see [Batch]) as the whole
// HTTP answer: a JSON array of responses, or 204 when there is none to send.
func WriteBatch(w http.ResponseWriter, resps []Response) error {
	if len(resps) == 0 {
		WriteNoReply(w)
		return nil
	}
	parts := make([]json.RawMessage, len(resps))
	for i, resp := range resps {
		b, err := json.Marshal(resp)
		if err != nil {
			b, _ = json.Marshal(ErrorResponse(resp.ID, InternalError("the result could not be encoded")))
		}
		parts[i] = b
	}
	data, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(append(data, '\n'))
	return err
}

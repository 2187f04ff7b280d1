package normalizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// JSON-RPC ids. An envelope keeps the request's id in Envelope.JSONRPCID as
// raw JSON in canonical form (e2a.CanonicalJSONRPCID): a number keeps its
// exact text (42 stays 42, 12345678901234567890 is not rounded), a string
// stays a string ("42" stays "42"), so that the answer echoes exactly the
// type and value the client sent. A request with "id": null has no
// JSONRPCID and is answered with id null; a request without an id member is
// a notification: Result.Notification and provenance.details
// jsonrpc_notification are set and the front door sends no answer.

// rpcRequest is a decoded JSON-RPC 2.0 request object.
type rpcRequest struct {
	ID     json.RawMessage // canonical; nil when absent or null
	HasID  bool            // the id member is present (possibly null)
	Method string
	Params json.RawMessage // nil when absent or null
}

// requestOf returns the JSON-RPC request of in: in.RPC when the front door
// decoded it, else in.Body parsed.
func requestOf(in Input, protocol string) (*rpcRequest, error) {
	if in.RPC == nil {
		return parseJSONRPC(in.Body, protocol)
	}
	rq := &rpcRequest{Method: in.RPC.Method, HasID: in.RPC.ID != nil}
	if in.RPC.ID != nil {
		id, err := e2a.CanonicalJSONRPCID(in.RPC.ID)
		if err != nil {
			return nil, rq.errf(ErrInvalidRequest, protocol, "id must be a string, a number or null")
		}
		rq.ID = id
	}
	if rq.Method == "" {
		return nil, rq.errf(ErrInvalidRequest, protocol, "method is required")
	}
	if !isNull(in.RPC.Params) {
		p := bytes.TrimSpace(in.RPC.Params)
		if e := checkJSONText(p, protocol); e != nil {
			e.JSONRPCID, e.Method = rq.ID, rq.Method
			return nil, e
		}
		if p[0] != '{' && p[0] != '[' {
			return nil, rq.errf(ErrInvalidRequest, protocol, "params must be an object or an array")
		}
		rq.Params = p
	}
	return rq, nil
}

// parseJSONRPC reads one JSON-RPC 2.0 request object. Errors are *Error
// with the id filled in when it could be read.
func parseJSONRPC(body []byte, protocol string) (*rpcRequest, error) {
	if e := checkJSONText(body, protocol); e != nil {
		return nil, e
	}
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' {
		if json.Valid(t) {
			if len(t) > 0 && t[0] == '[' {
				return nil, newErr(ErrInvalidRequest, protocol, "batch requests are not supported")
			}
			return nil, newErr(ErrInvalidRequest, protocol, "a request must be a JSON object")
		}
		return nil, newErr(ErrParse, protocol, "body is not valid JSON")
	}
	var raw map[string]json.RawMessage
	if err := e2a.DecodeStrict(t, &raw); err != nil {
		return nil, newErr(ErrParse, protocol, "body is not valid JSON: %v", err)
	}
	rq := &rpcRequest{}
	fail := func(kind error, format string, a ...any) error {
		e := newErr(kind, protocol, format, a...)
		e.JSONRPCID = rq.ID
		e.Method = rq.Method
		return e
	}
	if v, ok := raw["id"]; ok {
		rq.HasID = true
		id, err := e2a.CanonicalJSONRPCID(v)
		if err != nil {
			return nil, fail(ErrInvalidRequest, "id must be a string, a number or null")
		}
		rq.ID = id
	}
	if v, ok := raw["method"]; ok {
		if err := json.Unmarshal(v, &rq.Method); err != nil {
			return nil, fail(ErrInvalidRequest, "method must be a string")
		}
	}
	var version string
	if v, ok := raw["jsonrpc"]; !ok || json.Unmarshal(v, &version) != nil || version != "2.0" {
		return nil, fail(ErrInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if rq.Method == "" {
		if _, ok := raw["result"]; ok {
			return nil, fail(ErrInvalidRequest, "a JSON-RPC response is not a request")
		}
		if _, ok := raw["error"]; ok {
			return nil, fail(ErrInvalidRequest, "a JSON-RPC response is not a request")
		}
		return nil, fail(ErrInvalidRequest, "method is required")
	}
	if v, ok := raw["params"]; ok && !isNull(v) {
		if v[0] != '{' && v[0] != '[' {
			// JSON-RPC 2.0: params "MUST be a Structured value"; the
			// door's decoder (package jsonrpc) answers -32600 too.
			return nil, fail(ErrInvalidRequest, "params must be an object or an array")
		}
		rq.Params = v
	}
	return rq, nil
}

// paramsObject decodes the params of rq as an object (numbers as
// json.Number). Absent params give an empty map when optional.
func (rq *rpcRequest) paramsObject(protocol string, optional bool) (map[string]any, error) {
	if rq.Params == nil {
		if optional {
			return map[string]any{}, nil
		}
		return nil, rq.errf(ErrInvalidParams, protocol, "params are required")
	}
	if rq.Params[0] != '{' {
		return nil, rq.errf(ErrInvalidParams, protocol, "params must be an object")
	}
	var m map[string]any
	if err := e2a.DecodeStrict(rq.Params, &m); err != nil {
		return nil, rq.errf(ErrInvalidParams, protocol, "params: %v", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// decodeParams decodes the params of rq into v (a struct of the protocol's
// types), numbers in free-form values as json.Number.
func (rq *rpcRequest) decodeParams(protocol string, v any) error {
	if rq.Params == nil {
		return rq.errf(ErrInvalidParams, protocol, "params are required")
	}
	if rq.Params[0] != '{' {
		return rq.errf(ErrInvalidParams, protocol, "params must be an object")
	}
	if err := e2a.DecodeStrict(rq.Params, v); err != nil {
		return rq.errf(ErrInvalidParams, protocol, "params: %v", typeError(err))
	}
	return nil
}

func (rq *rpcRequest) errf(kind error, protocol, format string, a ...any) *Error {
	e := newErr(kind, protocol, format, a...)
	e.JSONRPCID = rq.ID
	e.Method = rq.Method
	return e
}

// setJSONRPC records the id and method on env.
func (rq *rpcRequest) setJSONRPC(env *e2a.Envelope) {
	env.JSONRPCID = rq.ID
	env.Provenance.Details[DetailJSONRPCMethod] = rq.Method
}

func isNull(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) == 0 || string(t) == "null"
}

// typeError shortens encoding/json type errors to the field and types.
func typeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: cannot be a JSON %s", te.Field, te.Value)
		}
		return fmt.Sprintf("cannot be a JSON %s", te.Value)
	}
	return err.Error()
}

func jsonValid(b []byte) bool { return json.Valid(b) }

// topLevelKeys returns the keys of a JSON object.
func topLevelKeys(body []byte) (map[string]bool, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	keys := make(map[string]bool, len(raw))
	for k := range raw {
		keys[k] = true
	}
	return keys, nil
}

// str returns m[key] when it is a string.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// obj returns m[key] when it is an object.
func obj(m map[string]any, key string) map[string]any {
	o, _ := m[key].(map[string]any)
	return o
}

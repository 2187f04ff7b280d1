package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// check tells whether v (a JSON value decoded with UseNumber) is of the
// type a request member takes; its error says what is wanted.
type check func(v any) error

// clientParams are the chat completions request members a request may set
// in its params (E2A params, as openai-go's ChatCompletionNewParams spells
// them): sampling, output limits and format, tools. The bridge's own
// members (model, messages, stream, stream_options, n) are never taken
// from a request.
var clientParams = []string{"temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
	"presence_penalty", "frequency_penalty", "response_format", "tools", "tool_choice", "parallel_tool_calls",
	"reasoning_effort"}

// operatorParams are the members WithParams takes: clientParams and the
// operator's own (attribution, caching and billing members no client
// chooses).
var operatorParams = append(slices.Clone(clientParams), "logit_bias", "user", "safety_identifier",
	"prompt_cache_key", "service_tier", "store", "metadata", "verbosity")

// limits are the members whose operator value bounds a client's
// (paramsFor): both spellings of the output token limit.
var limits = []string{"max_tokens", "max_completion_tokens"}

// checks is the type of each member of operatorParams.
var checks = map[string]check{
	"temperature": isNumber, "top_p": isNumber, "presence_penalty": isNumber, "frequency_penalty": isNumber,
	"max_tokens": isPositive, "max_completion_tokens": isPositive, "seed": isInteger,
	"stop": isStop, "response_format": isTyped, "tools": isTools, "tool_choice": isToolChoice,
	"parallel_tool_calls": isBool, "reasoning_effort": isString,
	"logit_bias": mapOf(isNumber, "numbers"), "user": isString, "safety_identifier": isString,
	"prompt_cache_key": isString, "service_tier": isString, "store": isBool,
	"metadata": mapOf(isString, "strings"), "verbosity": isString,
}

// WithParams sets request members sent in every call: those a request
// may set too (temperature, top_p, max_tokens, max_completion_tokens,
// stop, seed, presence_penalty, frequency_penalty, response_format, tools,
// tool_choice, parallel_tool_calls, reasoning_effort) and the operator's
// own (logit_bias, user, safety_identifier, prompt_cache_key,
// service_tier, store, metadata, verbosity), each of its JSON type (Go
// numbers, strings, bools, slices and maps of them, or what encoding/json
// decodes). Any other member (model, messages, stream, stream_options and
// n are the bridge's), or a value of the wrong type, is refused with
// bridge.ErrInvalidOption naming it. A request's own (its params) replace
// these, except that a request's max_tokens or max_completion_tokens is
// capped to the operator's limit (the smaller of the two when both are
// set), and then sent in place of the operator's.
func WithParams(p map[string]any) Option {
	params, err := checkParams(p, operatorParams)
	return func(u *Upstream) error {
		if err != nil {
			return fmt.Errorf("%w: upstream params: %w", bridge.ErrInvalidOption, err)
		}
		u.params = params
		return nil
	}
}

// ParseParams reads a JSON object of request members for WithParams (an
// operator's setting, e.g. `{"temperature": 0.2, "max_tokens": 1024}`),
// checked as WithParams checks them. Errors wrap bridge.ErrInvalidOption.
func ParseParams(s string) (map[string]any, error) {
	var m map[string]any
	if err := decodeOne([]byte(s), &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: upstream params: not a JSON object: %v", bridge.ErrInvalidOption, cmpErr(err, "null"))
	}
	if _, err := checkParams(m, operatorParams); err != nil {
		return nil, fmt.Errorf("%w: upstream params: %w", bridge.ErrInvalidOption, err)
	}
	return m, nil
}

// cmpErr is err, or a plain error of text when err is nil.
func cmpErr(err error, text string) error {
	if err == nil {
		return errors.New(text)
	}
	return err
}

// decodeOne decodes b, one JSON value and nothing after it, into v,
// numbers as json.Number.
func decodeOne(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// checkParams is p's members, each encoded as JSON, when each is one of
// allowed and of its type; the error names the first that is not (in
// name order).
func checkParams(p map[string]any, allowed []string) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(p))
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("%q is not a chat completions member the bridge takes (want one of %s)",
				k, strings.Join(allowed, ", "))
		}
		raw, err := checkMember(k, p[k])
		if err != nil {
			return nil, err
		}
		out[k] = raw
	}
	return out, nil
}

// checkMember is v as JSON when it is of member k's type.
func checkMember(k string, v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	var dec any
	if err := decodeOne(raw, &dec); err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if err := checks[k](dec); err != nil {
		return nil, fmt.Errorf("%s: %.100s is %s, want %w", k, raw, jsonType(dec), err)
	}
	return raw, nil
}

// paramsFor is the members sent for env: the operator's (WithParams), then
// the request's own (params: clientParams, the wrong type an
// invalid_request naming the member), a request's token limit capped to
// the operator's.
func (u *Upstream) paramsFor(env *e2a.Envelope) (map[string]json.RawMessage, error) {
	client := map[string]any{}
	for _, k := range clientParams {
		if v, ok := env.Params[k]; ok {
			client[k] = v
		}
	}
	if len(client) == 0 {
		return u.params, nil
	}
	own, err := checkParams(client, clientParams)
	if err != nil {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "params.%v", err)
	}
	out := maps.Clone(u.params)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	limit, capped := u.tokenLimit()
	if capped && (own["max_tokens"] != nil || own["max_completion_tokens"] != nil) {
		for _, k := range limits {
			delete(out, k) // the request's spelling replaces the operator's
		}
	}
	for k, v := range own {
		if capped && slices.Contains(limits, k) {
			if n, err := json.Number(v).Int64(); err == nil && n > limit {
				v = json.RawMessage(fmt.Sprint(limit))
			}
		}
		out[k] = v
	}
	return out, nil
}

// tokenLimit is the operator's output token limit: the smaller of its
// max_tokens and max_completion_tokens (ok false when it set neither).
func (u *Upstream) tokenLimit() (limit int64, ok bool) {
	for _, k := range limits {
		if raw, set := u.params[k]; set {
			if n, err := json.Number(raw).Int64(); err == nil && (!ok || n < limit) {
				limit, ok = n, true
			}
		}
	}
	return limit, ok
}

// MarshalJSON writes the request's members, then its Params (encode).
func (r request) MarshalJSON() ([]byte, error) { return r.encode() }

// encode is the request's body: its members, then its Params.
func (r *request) encode() ([]byte, error) {
	if b, ok := r.appendPlain(); ok {
		return r.appendParams(b)
	}
	// fixed is without MarshalJSON; a pointer to it, not a copy, goes
	// into json.Marshal's interface (a copy was an allocation).
	type fixed request
	b, err := json.Marshal((*fixed)(r))
	if err != nil || len(r.Params) == 0 {
		return b, err
	}
	return r.appendParams(b)
}

// appendParams appends the request's Params to b, its members.
func (r *request) appendParams(b []byte) ([]byte, error) {
	if len(r.Params) == 0 {
		return b, nil
	}
	extra, err := json.Marshal(r.Params) // never a member of fixed: checkParams
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

// appendPlain is the request's members as json.Marshal writes them
// (jsonstr.Append: its strings exactly), without reflection, when every
// message's content is a string and none holds tool calls (a text
// conversation); false for any other (encode encodes it reflectively).
func (r *request) appendPlain() ([]byte, bool) {
	if r.Messages == nil {
		return nil, false
	}
	n := len(r.Model) + 96
	for _, m := range r.Messages {
		s, ok := m.Content.(string)
		if !ok || m.ToolCalls != nil {
			return nil, false
		}
		n += len(m.Role) + len(s) + len(m.ToolCallID) + 48
	}
	b := make([]byte, 0, n+n/8) // room for a few escapes
	b = jsonstr.Append(append(b, `{"model":`...), r.Model)
	b = append(b, `,"messages":[`...)
	for i, m := range r.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(append(b, `{"role":`...), m.Role)
		b = jsonstr.Append(append(b, `,"content":`...), m.Content.(string))
		if m.ToolCallID != "" {
			b = jsonstr.Append(append(b, `,"tool_call_id":`...), m.ToolCallID)
		}
		b = append(b, '}')
	}
	b = strconv.AppendBool(append(b, `],"stream":`...), r.Stream)
	if o := r.StreamOptions; o != nil {
		b = strconv.AppendBool(append(b, `,"stream_options":{"include_usage":`...), o.IncludeUsage)
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// jsonType names the JSON type of v (decoded with UseNumber).
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	}
	return "an object"
}

func isNumber(v any) error {
	if _, ok := v.(json.Number); !ok {
		return errors.New("a number")
	}
	return nil
}

func isInteger(v any) error {
	if n, ok := v.(json.Number); ok {
		if _, err := n.Int64(); err == nil {
			return nil
		}
	}
	return errors.New("an integer")
}

func isPositive(v any) error {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil && i > 0 {
			return nil
		}
	}
	return errors.New("a positive integer")
}

func isString(v any) error {
	if _, ok := v.(string); !ok {
		return errors.New("a string")
	}
	return nil
}

func isBool(v any) error {
	if _, ok := v.(bool); !ok {
		return errors.New("a boolean")
	}
	return nil
}

// isStop: a string, or an array of strings.
func isStop(v any) error {
	if _, ok := v.(string); ok {
		return nil
	}
	if arr, ok := v.([]any); ok && !slices.ContainsFunc(arr, func(e any) bool { return isString(e) != nil }) {
		return nil
	}
	return errors.New("a string or an array of strings")
}

// isTyped: an object with a string member type (response_format).
func isTyped(v any) error {
	if m, ok := v.(map[string]any); ok && isString(m["type"]) == nil {
		return nil
	}
	return errors.New(`an object with a string "type"`)
}

// toolChoices are the tool_choice strings of the chat completions API.
var toolChoices = []string{"none", "auto", "required"}

// isToolChoice: "none", "auto" or "required", or an object naming a
// function ({"type":"function","function":{"name"}}) or allowing some
// tools ({"type":"allowed_tools","allowed_tools":{...}}). Another
// string or type is a 400 of the upstream, after a call; a custom tool's
// choice names a tool the bridge does not carry (isTools).
func isToolChoice(v any) error {
	if s, ok := v.(string); ok && slices.Contains(toolChoices, s) {
		return nil
	}
	m, _ := v.(map[string]any)
	switch typ, _ := m["type"].(string); typ {
	case "function":
		if def, _ := m["function"].(map[string]any); isName(def["name"]) {
			return nil
		}
	case "allowed_tools":
		if _, ok := m["allowed_tools"].(map[string]any); ok {
			return nil
		}
	}
	return errors.New(`"none", "auto", "required", {"type":"function","function":{"name"}} or {"type":"allowed_tools", ...}`)
}

// isTools: an array of function tools, each {"type":"function",
// "function":{"name", "description"?, "parameters"?, "strict"?}}, the
// parameters a JSON Schema object, the description a string, strict a
// boolean: what a chat completions server refuses with a 400 is the
// client's invalid_request here, the model not called. Custom tools
// ({"type":"custom"}) are refused: their calls stream as custom, not
// function, calls, which the bridge neither passes through nor replays in
// the history.
func isTools(v any) error {
	arr, ok := v.([]any)
	if !ok {
		return errors.New("an array of tools")
	}
	for i, e := range arr {
		m, _ := e.(map[string]any)
		def, _ := m["function"].(map[string]any)
		if m["type"] != "function" || !isName(def["name"]) || !optional(def, "parameters", isObject) ||
			!optional(def, "description", isString) || !optional(def, "strict", isBool) {
			return fmt.Errorf(`an array of function tools, each {"type":"function","function":{"name", `+
				`"description"?: a string, "parameters"?: an object, "strict"?: a boolean}} (tools[%d] is not)`, i)
		}
	}
	return nil
}

// isName reports a non-empty string (a function's name).
func isName(v any) bool {
	s, _ := v.(string)
	return s != ""
}

func isObject(v any) error {
	if _, ok := v.(map[string]any); !ok {
		return errors.New("an object")
	}
	return nil
}

// optional reports m's member k absent, or passing c.
func optional(m map[string]any, k string, c check) bool {
	v, ok := m[k]
	return !ok || c(v) == nil
}

// mapOf checks an object whose every member passes c (of the type what).
func mapOf(c check, what string) check {
	return func(v any) error {
		m, ok := v.(map[string]any)
		if !ok || slices.ContainsFunc(slices.Collect(maps.Values(m)), func(e any) bool { return c(e) != nil }) {
			return fmt.Errorf("an object of %s", what)
		}
		return nil
	}
}

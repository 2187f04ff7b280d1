package a2av1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// A2A v1.0's JSON is the proto JSON mapping of a2a.proto (ProtoJSON): a
// 32-bit integer may be sent as a JSON number, integral (2, 2.0, 2e0), or
// as a string holding one ("2"), and an enum value by its name or by its
// number. The SDK's transport decodes the params with encoding/json into
// its request types, which take an integer as an integral number without
// fraction or exponent only, and an enum (a string type) by its name only:
// {"pageSize":"2"} and "role":1 were refused. protoJSONNumbers rewrites
// those members as the SDK reads them; a2a.proto's v1.0 requests have no
// 64-bit integer (ProtoJSON's strings for int64 do not arise).

// protoKind is how ProtoJSON reads a member.
type protoKind int

const (
	protoInt32 protoKind = iota
	protoTaskState
	protoRole
)

// protoField is a member of a request read as a 32-bit integer or an
// enum: its path from the params (or body) object.
type protoField struct {
	path []string
	kind protoKind
}

var sendFields = []protoField{{[]string{"configuration", "historyLength"}, protoInt32}, {[]string{"message", "role"}, protoRole}}

// protoFields are, by JSON-RPC method, the members of its request that
// are 32-bit integers or enums (a2a.proto v1.0: SendMessageConfiguration
// history_length, Message role, GetTaskRequest history_length,
// ListTasksRequest page_size, history_length and status,
// ListTaskPushNotificationConfigsRequest page_size). The other requests
// have none.
var protoFields = map[string][]protoField{
	methodSendMessage:          sendFields,
	methodSendStreamingMessage: sendFields,
	"GetTask":                  {{[]string{"historyLength"}, protoInt32}},
	"ListTasks": {{[]string{"pageSize"}, protoInt32}, {[]string{"historyLength"}, protoInt32},
		{[]string{"status"}, protoTaskState}},
	"ListTaskPushNotificationConfigs": {{[]string{"pageSize"}, protoInt32}},
}

// quotedNames are the names of protoFields' members quoted, as
// mayNeedNumbers looks for them (made once: a request pays no allocation
// for them).
var quotedNames = func() map[string][]byte {
	m := map[string][]byte{}
	for _, fields := range protoFields {
		for _, f := range fields {
			name := f.path[len(f.path)-1]
			m[name] = []byte(`"` + name + `"`)
		}
	}
	return m
}()

// protoJSONNumbers returns params, a call of method's params (JSON
// names), with the members protoFields names written as the SDK's
// decoding reads them: an integer as a JSON integer, an enum value sent
// by number as its name (numbersAsSDK).
func protoJSONNumbers(method string, params json.RawMessage) (json.RawMessage, error) {
	_, escaped, _ := memberNames(params)
	return numbersAsSDK(protoFields[method], params, escaped)
}

// numbersAsSDK returns params with fields' members written as the SDK's
// decoding reads them. A member that is no integer (a string that holds
// none, a number with a fraction) or out of the 32-bit range, and an enum
// number that names no value, is InvalidParams naming the member. Params
// of another shape, and members of another JSON type, are left as they
// are, for the SDK's answer. params itself when nothing changes; params
// that have none of the members (mayNeedNumbers; escaped: a member name
// holds an escape, which it cannot tell) are not decoded.
func numbersAsSDK(fields []protoField, params json.RawMessage, escaped bool) (json.RawMessage, error) {
	if len(fields) == 0 || !escaped && !mayNeedNumbers(params, fields) {
		return params, nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil || top == nil {
		return params, nil
	}
	changed := false
	for _, f := range fields {
		c, err := f.fix(top, f.path)
		if err != nil {
			return nil, err
		}
		changed = changed || c
	}
	if !changed {
		return params, nil
	}
	b, err := json.Marshal(top)
	if err != nil {
		return params, nil
	}
	return b, nil
}

// mayNeedNumbers reports whether params may hold one of fields' members
// in a form the SDK does not read: a member of its name whose value is a
// string or a number with a fraction or exponent (an integer), or a
// number (an enum). A quick scan of the bytes: a member of that name
// elsewhere (in metadata) makes it decode the params for nothing, never
// miss one but for a name written with escapes (\u0070ageSize), which
// memberNames tells.
func mayNeedNumbers(params json.RawMessage, fields []protoField) bool {
	for _, f := range fields {
		key := quotedNames[f.path[len(f.path)-1]]
		for rest := params; ; {
			i := bytes.Index(rest, key)
			if i < 0 {
				break
			}
			rest = rest[i+len(key):]
			v := bytes.TrimLeft(rest, " \t\r\n")
			if len(v) == 0 || v[0] != ':' {
				continue
			}
			v = bytes.TrimLeft(v[1:], " \t\r\n")
			if len(v) > 0 && f.kind.needs(v) {
				return true
			}
		}
	}
	return false
}

// needs reports whether v, a member's value (and what follows it), is not
// in the form the SDK reads for k.
func (k protoKind) needs(v []byte) bool {
	number := v[0] == '-' || v[0] >= '0' && v[0] <= '9'
	if k != protoInt32 {
		return number
	}
	if v[0] == '"' {
		return true
	}
	if !number {
		return false
	}
	end := bytes.IndexAny(v, ",}] \t\r\n")
	if end < 0 {
		end = len(v)
	}
	return bytes.ContainsAny(v[:end], ".eE")
}

// at reports whether f is the member name of the object at path (jsonNames'
// form: "", "configuration.").
func (f protoField) at(path, name string) bool {
	for _, p := range f.path[:len(f.path)-1] {
		rest, ok := strings.CutPrefix(path, p)
		if !ok || !strings.HasPrefix(rest, ".") {
			return false
		}
		path = rest[1:]
	}
	return path == "" && name == f.path[len(f.path)-1]
}

// fix rewrites f's member at path in obj (its rest from obj); changed
// reports whether it did.
func (f protoField) fix(obj map[string]json.RawMessage, path []string) (changed bool, err error) {
	v, ok := obj[path[0]]
	if !ok {
		return false, nil
	}
	if len(path) > 1 {
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) != nil || sub == nil {
			return false, nil // not an object: the SDK's answer
		}
		if changed, err = f.fix(sub, path[1:]); !changed || err != nil {
			return changed, err
		}
		b, err := json.Marshal(sub)
		if err != nil {
			return false, nil
		}
		obj[path[0]] = b
		return true, nil
	}
	nv, err := f.value(bytes.TrimSpace(v))
	if err != nil || nv == nil {
		return false, err
	}
	obj[path[0]] = nv
	return true, nil
}

// value is v, f's member's value, as the SDK reads it; nil when it is
// read as it is (or is of a JSON type ProtoJSON does not take either,
// for the SDK's answer).
func (f protoField) value(v []byte) (json.RawMessage, error) {
	if len(v) == 0 || !f.kind.needs(v) {
		return nil, nil
	}
	name := strings.Join(f.path, ".")
	if f.kind != protoInt32 {
		return f.enum(name, string(v))
	}
	tok := string(v)
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, nil
		}
		if !numberToken(s) {
			return nil, fmt.Errorf("%w: %s must be an integer (a number, or a string holding one), not the string %s",
				a2a.ErrInvalidParams, name, jsonrpc.QuoteForMessage(s))
		}
		tok = s
	}
	n, err := int32Of(name, tok)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(int64(n), 10)), nil
}

// enum is the name of the enum value numbered tok (a JSON number) of
// f's enum, as a JSON string.
func (f protoField) enum(name, tok string) (json.RawMessage, error) {
	n, ok := integer(tok)
	if !ok {
		return nil, f.kind.enumError(name, numberForMessage(tok))
	}
	s, err := f.kind.enumName(name, n, tok)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(`"` + s + `"`), nil // a value's name is an identifier: nothing to escape
}

// enumNames are the names of k's enum values by number, and what a value
// of it is called.
func (k protoKind) enumNames() (map[int32]string, string) {
	if k == protoRole {
		return a2apb.Role_name, "a Role"
	}
	return a2apb.TaskState_name, "a TaskState"
}

// enumName is the name of k's enum value numbered n (tok as sent);
// InvalidParams naming member name when none is (n beyond 32 bits too).
func (k protoKind) enumName(name string, n int64, tok string) (string, error) {
	names, _ := k.enumNames()
	if s, ok := names[int32(n)]; ok && n == int64(int32(n)) {
		return s, nil
	}
	return "", k.enumError(name, numberForMessage(tok))
}

// enumError is the InvalidParams of member name's value shown, no value
// of k's enum.
func (k protoKind) enumError(name, shown string) error {
	names, what := k.enumNames()
	return fmt.Errorf("%w: %s must be %s name (such as %s) or its number (0 to %d), not %s",
		a2a.ErrInvalidParams, name, what, names[1], len(names)-1, shown)
}

// numberForMessage is tok, a JSON number, as an error message shows it:
// as sent, cut after 32 bytes.
func numberForMessage(tok string) string {
	if len(tok) > 32 {
		return tok[:32] + "…"
	}
	return tok
}

// numberToken reports whether s is one JSON number, nothing around it
// (what ProtoJSON takes in a string for an integer).
func numberToken(s string) bool {
	return s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && json.Valid([]byte(s))
}

// int32Of is tok, a JSON number, as a 32-bit integer: InvalidParams
// naming member name when it has a fraction or is out of range.
func int32Of(name, tok string) (int32, error) {
	n, ok := integer(tok)
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: %s must be an integer, not the number %s", a2a.ErrInvalidParams, name, numberForMessage(tok))
	case n < math.MinInt32 || n > math.MaxInt32:
		return 0, fmt.Errorf("%w: %s must be a 32-bit integer (%d to %d), not %s", a2a.ErrInvalidParams, name,
			math.MinInt32, math.MaxInt32, numberForMessage(tok))
	}
	return int32(n), nil
}

// integer is tok, a JSON number, as an integer when it is one (2, -3,
// 2.0, 1e3, 250e-2 is not); one beyond 64 bits is reported as
// math.MaxInt64 (or MinInt64), out of any 32-bit range. Exact: the
// digits are not read as a float.
func integer(tok string) (int64, bool) {
	neg := strings.HasPrefix(tok, "-")
	tok = strings.TrimPrefix(tok, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(tok), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil {
			e = math.MaxInt32 // beyond any integer's digits; checked below
			if strings.HasPrefix(expPart, "-") {
				e = math.MinInt32
			}
		}
		exp = e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimRight(whole+frac, "0")
	lead := len(digits)
	digits = strings.TrimLeft(digits, "0")
	point := len(whole) + exp - (lead - len(digits)) // digits before the decimal point
	switch {
	case digits == "":
		return 0, true
	case point < len(digits):
		return 0, false // a fraction
	case point > 19:
		return bound(neg), true
	}
	n, err := strconv.ParseInt(digits+strings.Repeat("0", point-len(digits)), 10, 64)
	if err != nil {
		return bound(neg), true
	}
	if neg {
		n = -n
	}
	return n, true
}

// bound is an integer beyond 64 bits, of its sign.
func bound(neg bool) int64 {
	if neg {
		return math.MinInt64
	}
	return math.MaxInt64
}

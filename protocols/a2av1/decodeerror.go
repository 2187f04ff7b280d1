package a2av1

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// decodeError is err, the error of decoding a JSON-RPC call's params or an
// HTTP+JSON body (what names them: "params", "the body") that are valid
// JSON into the SDK's request, as the SDK's InvalidParams (A2A v1.0
// §3.3.2: a validation error; -32700 is for invalid JSON) in JSON's words
// (decodeMessage).
func decodeError(what string, err error) error {
	return fmt.Errorf("%w: %s", a2a.ErrInvalidParams, decodeMessage(what, err))
}

// decodeMessage is what a client reads of a decoding error of its request:
// a member of the wrong JSON type named by its path and the JSON types
// ("message.parts must be an array, not a string"), never by the Go types
// of encoding/json's message ("cannot unmarshal string into Go struct
// field Message.message.parts of type []*a2a.Part"); a timestamp or raw
// bytes in the wrong format by the format, a part with no content by the
// members it may have; the SDK's own words otherwise ("expected exactly
// one of text, raw, data, or url, got 2").
func decodeMessage(what string, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		if te.Field != "" {
			what = te.Field
		}
		return fmt.Sprintf("%s must be %s, not %s", what, wantedJSON(te.Type), sentJSON(te.Value))
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return "a timestamp must be an RFC 3339 string (2006-01-02T15:04:05Z), not " + jsonrpc.QuoteForMessage(pe.Value)
	}
	var be base64.CorruptInputError
	if errors.As(err, &be) {
		return "a part's raw bytes must be base64 (" + be.Error() + ")"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown part content type") {
		// The SDK lists the part's members as a Go slice ("[]", "[foo]").
		return "a part must have one of text, raw, data or url"
	}
	return msg
}

// wantedJSON names the JSON type a value of Go type t is decoded from.
func wantedJSON(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 string"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "an integer"
	case t.Kind() == reflect.Float32, t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "an object"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "a base64 string"
	case t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
		return "an array"
	}
	return "another JSON type"
}

// sentJSON names the JSON value of an UnmarshalTypeError ("string",
// "number", "number -5", "bool", "array", "object") as a client reads it.
func sentJSON(v string) string {
	kind, num, isNum := strings.Cut(v, " ")
	switch {
	case isNum && kind == "number":
		return "the number " + num
	case v == "bool":
		return "a boolean"
	case v == "array", v == "object":
		return "an " + v
	}
	return "a " + v
}

// paramsTarget is a new value of the request type the SDK decodes a
// JSON-RPC method's params into, nil for a method it has none for.
func paramsTarget(method string) any {
	switch method {
	case "SendMessage", methodSendStreamingMessage:
		return &a2a.SendMessageRequest{}
	case "GetTask":
		return &a2a.GetTaskRequest{}
	case "ListTasks":
		return &a2a.ListTasksRequest{}
	case "CancelTask":
		return &a2a.CancelTaskRequest{}
	case methodSubscribeToTask:
		return &a2a.SubscribeToTaskRequest{}
	case "CreateTaskPushNotificationConfig":
		return &a2a.PushConfig{}
	case "GetTaskPushNotificationConfig":
		return &a2a.GetTaskPushConfigRequest{}
	case "ListTaskPushNotificationConfigs":
		return &a2a.ListTaskPushConfigRequest{}
	case "DeleteTaskPushNotificationConfig":
		return &a2a.DeleteTaskPushConfigRequest{}
	case "GetExtendedAgentCard":
		return &a2a.GetExtendedAgentCardRequest{}
	}
	return nil
}

// bodyTarget is paramsTarget for the HTTP+JSON binding: a new value of
// the request type the SDK decodes a POST's body at path into, nil for
// none.
func bodyTarget(path string) any {
	switch {
	case strings.HasSuffix(path, "/message:send"), strings.HasSuffix(path, "/message:stream"):
		return &a2a.SendMessageRequest{}
	case strings.HasSuffix(path, "/pushNotificationConfigs"):
		return &a2a.PushConfig{}
	}
	return nil
}

// decodeAgain decodes b into target (nil: nothing to decode) and returns
// the decoding error, nil for none: what the SDK's transport was refused
// by, as it reported it with no detail (HTTP+JSON: "parse error") or in
// Go's words; read again on the error answer only.
func decodeAgain(b []byte, target any) error {
	if target == nil {
		return nil
	}
	return json.Unmarshal(b, target)
}

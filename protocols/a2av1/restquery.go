package a2av1

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// An HTTP+JSON GET (a2a.proto's HTTP annotations: GetTask, ListTasks,
// ListTaskPushNotificationConfigs) carries the request's fields that its
// path does not in its query, read as the gRPC-gateway reads them
// (req.ParseForm, then runtime.PopulateQueryParameters): a query that is
// no URL-encoded form (%zz, a semicolon) is refused whole; a parameter
// names a field by its proto name (page_size) or its JSON name
// (pageSize), once; its value is the field's in the gateway's forms (an
// integer in decimal within 32 bits, a boolean as strconv.ParseBool reads
// it, an enum by name or number, a timestamp in RFC 3339); a parameter
// that names no field is ignored. The SDK's handler reads the JSON names alone, the first value
// of each, and a value it cannot read is "invalid request" naming
// nothing: restQuery reads the query as the gateway does and hands the
// SDK the JSON names.

// queryKind is how the gateway reads a query parameter's value (its
// parseField for the field's kind).
type queryKind int

const (
	queryString queryKind = iota
	queryInt32
	queryBool
	queryTaskState
	queryTimestamp
)

// queryField is a field of a2a.proto's request a GET's query may set: its
// proto name, its JSON name (the SDK's) and kind.
type queryField struct {
	proto, json string
	kind        queryKind
}

// tenantField is the request's tenant, a field of every request of
// a2a.proto, which the gateway reads from the query of a route whose path
// does not carry it (GET /tasks/{id}, not /{tenant}/tasks/{id}: that
// route's filter takes the query's out) and whose body is not "*" (the
// GETs and DeleteTaskPushNotificationConfig: the gateway's generated code
// reads no query for message:send, message:stream, a cancel or a push
// config's creation, whose tenant is the body's).
var tenantField = queryField{"tenant", "tenant", queryString}

// The query's fields of each route, the tenant last (a path tenant takes
// it off: restQuery).
var (
	// getTaskQuery is GetTaskRequest's (GET /tasks/{id}: id in the path).
	getTaskQuery = []queryField{{"history_length", "historyLength", queryInt32}, tenantField}
	// listTasksQuery is ListTasksRequest's (GET /tasks).
	listTasksQuery = []queryField{{"context_id", "contextId", queryString}, {"status", "status", queryTaskState},
		{"page_size", "pageSize", queryInt32}, {"page_token", "pageToken", queryString},
		{"history_length", "historyLength", queryInt32}, {"status_timestamp_after", "statusTimestampAfter", queryTimestamp},
		{"include_artifacts", "includeArtifacts", queryBool}, tenantField}
	// listPushConfigsQuery is ListTaskPushNotificationConfigsRequest's
	// (GET /tasks/{task_id}/pushNotificationConfigs).
	listPushConfigsQuery = []queryField{{"page_size", "pageSize", queryInt32}, {"page_token", "pageToken", queryString}, tenantField}
	// tenantQuery is the tenant alone, of the routes whose path holds
	// every other field: SubscribeToTask, GetExtendedAgentCard,
	// GetTaskPushNotificationConfig and DeleteTaskPushNotificationConfig.
	tenantQuery = []queryField{tenantField}
)

// lastUpdatedAfter is the query parameter a2a-go/v2's client (v2.4.0,
// a2aclient/rest.go) sends ListTasksRequest.status_timestamp_after as:
// read as the field when no name of the field is given (a2a.proto has no
// such field; the gateway ignores it).
const lastUpdatedAfter = "lastUpdatedAfter"

// restQuery reads raw, the query of an HTTP+JSON call of method on route
// (its path, a path tenant taken off: pathTenant reports whether it had
// one), as the gateway reads it into the request of its route
// (queryFields): req.ParseForm, then runtime.PopulateQueryParameters.
// q is the query parsed, rewritten with the fields read by their JSON
// names (a TaskState by name), which the SDK's handler reads (changed: q
// was rewritten). tenant is the request's tenant the query gives ("" for
// none, and with a path tenant, whose route's filter takes the query's
// out). What the gateway refuses is InvalidParams naming what is wrong
// (A2A v1.0 §3.3.2; JSON-RPC answers the same field so, §5.1), with the
// task the path names (taskID, "" for none): a query that is no
// URL-encoded form (url.ParseQuery's error: an escape that is none, a
// semicolon, too many parameters), a value not of its field's type
// (§11.5), a parameter given more than once ("too many values"), a path
// into a field that is no message (page_size.x, tenant.x). A route whose
// query the gateway does not read (its body "*", or its path holding
// every field of its request) has its query parsed as far as it can be,
// unrefused. Where the gateway's reading is not one reading, restQuery
// refuses: a field given by both its names (the gateway keeps one of them
// at random: it ranges over a map), and a path into
// status_timestamp_after (.seconds, .nanos: which of the timestamp and
// its parts wins is that map's order too); a TaskState number beyond 32
// bits (wrapped into one by the gateway) is refused too.
func restQuery(method, route, raw string, pathTenant bool) (q url.Values, taskID, tenant string, changed bool, err error) {
	q, parseErr := host.ReadQuery(raw)
	fields, taskID := queryFields(method, route)
	if pathTenant && len(fields) > 0 {
		fields = fields[:len(fields)-1] // the tenant, last
	}
	switch {
	case len(fields) == 0:
		return q, taskID, "", false, nil // the gateway reads no query here
	case parseErr != nil:
		return q, taskID, "", false, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, parseErr)
	case len(q) == 0:
		return q, taskID, "", false, nil
	}
	if changed, err = readQuery(q, fields); err != nil {
		return q, taskID, "", false, err
	}
	if route == restListPath {
		c, err := queryAlias(q)
		if err != nil {
			return q, taskID, "", false, err
		}
		changed = changed || c
	}
	if !pathTenant {
		tenant = q.Get(tenantField.json)
	}
	return q, taskID, tenant, changed, nil
}

// queryFields are the query's fields of the route of method and path (a
// path tenant taken off) and the task it names; nil for none of
// a2a.proto's routes whose body is not "*" (restQuery reads no query of
// another: the SDK answers it).
func queryFields(method, path string) ([]queryField, string) {
	get := method == http.MethodGet || method == http.MethodHead
	switch {
	case !get && method != http.MethodDelete:
		return nil, ""
	case path == restListPath:
		return fieldsIf(get, listTasksQuery), ""
	case path == restExtendedCardPath:
		return fieldsIf(get, tenantQuery), ""
	}
	rest, ok := strings.CutPrefix(path, restListPath+"/")
	if !ok || rest == "" {
		return nil, ""
	}
	id, sub, nested := strings.Cut(rest, "/")
	if !nested {
		if task, ok := strings.CutSuffix(rest, ":subscribe"); ok {
			return fieldsIf(get && task != "", tenantQuery), task
		}
		return fieldsIf(get, getTaskQuery), rest
	}
	cfg, ok := strings.CutPrefix(sub, "pushNotificationConfigs")
	switch {
	case !ok || id == "":
		return nil, ""
	case cfg == "":
		return fieldsIf(get, listPushConfigsQuery), id
	case cfg[0] == '/' && len(cfg) > 1 && !strings.Contains(cfg[1:], "/"):
		return tenantQuery, id // GET and DELETE
	}
	return nil, ""
}

// fieldsIf is fields when ok, nil otherwise.
func fieldsIf(ok bool, fields []queryField) []queryField {
	if !ok {
		return nil
	}
	return fields
}

// readQuery reads q as the gateway reads a query into a request of fields
// (restQuery), and rewrites it in place as the SDK reads it: each field
// given under its JSON name, its value the SDK's form. changed reports
// whether q was rewritten.
func readQuery(q url.Values, fields []queryField) (changed bool, err error) {
	by := make([]string, len(fields)) // the parameter each field was read from
	type read struct {
		key   string
		f     int
		value string
	}
	var reads []read
	for _, key := range slices.Sorted(maps.Keys(q)) { // sorted: the first error is one error
		name, values := queryKey(key, q[key])
		head, sub, dotted := strings.Cut(name, ".")
		f := slices.IndexFunc(fields, func(f queryField) bool { return f.proto == head || f.json == head })
		if f < 0 {
			continue // a parameter of no field: the gateway ignores it
		}
		fd := fields[f]
		switch {
		case dotted && fd.kind == queryTimestamp:
			return false, fmt.Errorf("%w: %s: %s is read whole, as an RFC 3339 timestamp (2006-01-02T15:04:05Z), not by its parts (%s)",
				a2a.ErrInvalidParams, jsonrpc.QuoteForMessage(key), fd.json, jsonrpc.QuoteForMessage(sub))
		case dotted:
			return false, fmt.Errorf("%w: %s: %s has no fields", a2a.ErrInvalidParams, jsonrpc.QuoteForMessage(key), fd.json)
		case len(values) > 1:
			return false, fmt.Errorf("%w: %s is given %d times; give it once", a2a.ErrInvalidParams, jsonrpc.QuoteForMessage(key), len(values))
		case by[f] != "":
			a, b := by[f], key
			return false, fmt.Errorf("%w: %s is given as %s and as %s; give it once, by one name",
				a2a.ErrInvalidParams, fd.json, jsonrpc.QuoteForMessage(a), jsonrpc.QuoteForMessage(b))
		}
		by[f] = key
		v, err := fd.value(values[0])
		if err != nil {
			return false, err
		}
		reads = append(reads, read{key, f, v})
	}
	for _, rd := range reads {
		name := fields[rd.f].json
		if rd.key == name && rd.value == q.Get(name) {
			continue
		}
		q.Del(rd.key)
		q.Set(name, rd.value)
		changed = true
	}
	return changed, nil
}

// queryKey is a query parameter's field path and values as the gateway
// reads them: key[x] is key with x as a first value (its syntax for a
// map's entry; a field of another kind given so has two values). The
// match is its regular expression's, ^(.*)\[(.*)\]$ (no newline in key).
func queryKey(key string, values []string) (string, []string) {
	if !strings.HasSuffix(key, "]") || strings.Contains(key, "\n") {
		return key, values
	}
	i := strings.LastIndexByte(key[:len(key)-1], '[')
	if i < 0 {
		return key, values
	}
	return key[:i], append([]string{key[i+1 : len(key)-1]}, values...)
}

// value is v, f's value in the query, as the SDK reads f; InvalidParams
// naming f when the gateway cannot read it (an empty value of a field
// that is no string too: the gateway parses it).
func (f queryField) value(v string) (string, error) {
	switch f.kind {
	case queryInt32:
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return "", fmt.Errorf("%w: %s must be an integer (a 32-bit one, in decimal), not %s",
				a2a.ErrInvalidParams, f.json, jsonrpc.QuoteForMessage(v))
		}
	case queryBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return "", fmt.Errorf("%w: %s must be true or false, not %s", a2a.ErrInvalidParams, f.json, jsonrpc.QuoteForMessage(v))
		}
	case queryTaskState:
		return queryStatus(f.json, v)
	case queryTimestamp:
		return v, queryTime(f.json, v)
	}
	return v, nil
}

// queryStatus is v, a TaskState in a query, by name, as the SDK reads
// it: a value's name, else a decimal number (strconv.Atoi's), as the
// gateway reads an enum; InvalidParams naming the parameter name for
// another value, a number that names no value or is beyond 32 bits (the
// gateway wraps it into 32).
func queryStatus(name, v string) (string, error) {
	if _, ok := a2apb.TaskState_value[v]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return "", protoTaskState.enumError(name, jsonrpc.QuoteForMessage(v))
	}
	return protoTaskState.enumName(name, int64(n), v)
}

// queryTime is the InvalidParams of v, timestamp parameter name's value,
// when the gateway does not read it: RFC 3339, fractional seconds
// allowed, from year 1 to 9999 (a google.protobuf.Timestamp's range).
func queryTime(name, v string) error {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !timestamppb.New(t).IsValid() {
		return fmt.Errorf("%w: %s must be an RFC 3339 timestamp (2006-01-02T15:04:05Z), not %s",
			a2a.ErrInvalidParams, name, jsonrpc.QuoteForMessage(v))
	}
	return nil
}

// queryAlias reads lastUpdatedAfter as ListTasks' statusTimestampAfter
// when q does not give the field (readQuery has put it under its JSON
// name): changed reports whether it did.
func queryAlias(q url.Values) (changed bool, err error) {
	alias := q.Get(lastUpdatedAfter)
	if alias == "" || q.Has("statusTimestampAfter") {
		return false, nil
	}
	if err := queryTime(lastUpdatedAfter, alias); err != nil {
		return false, err
	}
	q.Set("statusTimestampAfter", alias)
	return true, nil
}

package a2a

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Name is the protocol's name in the registry and in metric labels (the
// endpoint's calls are counted under it, AgentVault's too).
const Name = "a2a"

// Path is the HTTP endpoint: POST only.
const Path = "/a2a"

// Methods are the A2A v0.3 methods of the endpoint.
var Methods = []host.Method{
	{Name: normalizer.A2AMessageSend}, {Name: normalizer.A2AMessageStream, Streaming: true},
	{Name: normalizer.A2ATasksGet}, {Name: normalizer.A2ATasksCancel},
	{Name: normalizer.A2ATasksResubscribe, Streaming: true},
	{Name: normalizer.A2APushConfigSet}, {Name: normalizer.A2APushConfigGet},
	{Name: normalizer.A2APushConfigList}, {Name: normalizer.A2APushConfigDelete},
	{Name: normalizer.A2AGetAuthenticatedExtendedCard},
}

// AgentVaultMethods are the AgentVault profile's methods; tasks/get and
// tasks/cancel are A2A's names too, answered in the shape of the protocol
// that created the task.
var AgentVaultMethods = []host.Method{
	{Name: normalizer.AVTasksSend}, {Name: normalizer.AVTasksSendSubscribe, Streaming: true},
	{Name: normalizer.AVTasksGet}, {Name: normalizer.AVTasksCancel},
}

// V1Methods are the A2A v1.0 JSON-RPC methods; a single call of one at
// [Path] is served by the host's v1.0 handler ([host.TaskHost.A2AV1]).
var V1Methods = []host.Method{
	{Name: "SendMessage"}, {Name: "SendStreamingMessage", Streaming: true}, {Name: "GetTask"},
	{Name: "ListTasks"}, {Name: "CancelTask"}, {Name: "SubscribeToTask", Streaming: true},
	{Name: "GetExtendedAgentCard"}, {Name: "GetTaskPushNotificationConfig"},
	{Name: "CreateTaskPushNotificationConfig"}, {Name: "ListTaskPushNotificationConfigs"},
	{Name: "DeleteTaskPushNotificationConfig"},
}

// tables are the method tables of the endpoint, in dispatch order (a
// name in several belongs to the first).
var tables = [][]host.Method{Methods, AgentVaultMethods, V1Methods}

// method returns the method of the endpoint's tables and the table's
// index (0 A2A v0.3, 1 AgentVault, 2 A2A v1.0).
func method(name string) (host.Method, int, bool) {
	for t, ms := range tables {
		if i := slices.IndexFunc(ms, func(m host.Method) bool { return m.Name == name }); i >= 0 {
			return ms[i], t, true
		}
	}
	return host.Method{}, 0, false
}

// Streaming reports whether method is answered as a stream (and so cannot
// be batched).
func Streaming(name string) bool {
	m, _, ok := method(name)
	return ok && m.Streaming
}

// Label bounds a method name for a metric label: a method of the
// endpoint's tables as is, "other" for anything else.
func Label(name string) string {
	if _, _, ok := method(name); ok {
		return name
	}
	return "other"
}

// isV1 reports the A2A v1.0 method names.
func isV1(name string) bool {
	_, t, ok := method(name)
	return ok && t == 2
}

// Endpoint is the JSON-RPC endpoint of A2A v0.3 and the AgentVault
// profile over h, for the registry: POST /a2a, a single A2A v1.0 call
// handed to the host's v1.0 handler. h is a [host.TaskHost] (ingress); a
// host that is not one answers every call with an internal error.
func Endpoint(h host.RPCHost) host.RPCEndpoint {
	d := &frontDoor{}
	d.h, _ = h.(host.TaskHost)
	return host.RPCEndpoint{Protocol: Name, Refuse: Refuse, Streaming: Streaming, Metric: Label, Serve: d.serve,
		NotifyErrors: true, Peek: d.peek, Cancels: Cancels}
}

// Cancels reports the method that cancels the caller's task, tasks/cancel
// (A2A v0.3 and AgentVault: host.RPCEndpoint.Cancels). A single v1.0
// CancelTask posted here is the v1.0 binding's (Peek).
func Cancels(method string) bool { return method == normalizer.A2ATasksCancel }

// Refuse writes a refusal as a JSON-RPC error object (id null) with the
// refusal's HTTP status: A2A clients see the status, AgentVault clients
// the code.
func Refuse(w http.ResponseWriter, f host.Refusal) { host.RefuseJSONRPC(w, nil, f) }

// peek hands a single A2A v1.0 call to the host's v1.0 JSON-RPC binding
// (host.TaskHost.BindingRPC): clients
// and the A2A TCK that resolve the card's v0.3 url for JSON-RPC whatever
// the version reach v1.0 here too (method names of the two generations
// never collide). Other requests are refused echoing the id of body's
// call when it is readable. The common case costs a byte search: the body
// is parsed only when a v1.0 method name occurs in it.
func (d *frontDoor) peek(body []byte) (http.Handler, host.Refuse) {
	refuse := refuseWithID(body)
	if d.h == nil {
		return nil, refuse
	}
	found := false
	for _, m := range V1Methods {
		if bytes.Contains(body, []byte(`"`+m.Name+`"`)) {
			found = true
			break
		}
	}
	if !found {
		return nil, refuse
	}
	var head struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &head) != nil || !isV1(head.Method) {
		return nil, refuse // a batch or not JSON: the v0.3 path answers
	}
	return d.h.BindingRPC(), refuse
}

// refuseWithID is Refuse echoing the id of body's call when it is
// readable (body is parsed only for a refusal).
func refuseWithID(body []byte) host.Refuse {
	return func(w http.ResponseWriter, f host.Refusal) {
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &head) != nil || !jsonrpc.ValidID(head.ID) {
			head.ID = nil
		}
		host.RefuseJSONRPC(w, head.ID, f)
	}
}

// sseErrors writes a JSON answer as one SSE event (data: the JSON-RPC
// response) and passes an event stream through: a client of a streaming
// method (message/stream, tasks/resubscribe, tasks/sendSubscribe) reads
// every answer, errors included, as the stream it asked for. AgentVault's
// tasks/sendSubscribe gets an error as the profile's stream error, event
// error with data {"error": "<code>", "message": "<desc>"} (the JSON-RPC
// code, as a string): its client reads an unnamed event as a message,
// drops it as one that does not validate, and ends the stream as if
// nothing had failed.
type sseErrors struct {
	http.ResponseWriter
	decided, sse bool
	agentVault   bool
}

func (w *sseErrors) decide() {
	if w.decided {
		return
	}
	w.decided = true
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.sse = true
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
	}
}

func (w *sseErrors) WriteHeader(code int) {
	w.decide()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sseErrors) Write(b []byte) (int, error) {
	w.decide()
	if !w.sse {
		return w.ResponseWriter.Write(b)
	}
	event := append(append([]byte("data: "), bytes.TrimRight(b, "\n")...), '\n', '\n')
	if w.agentVault {
		event = avErrorEvent(b, event)
	}
	if _, err := w.ResponseWriter.Write(event); err != nil {
		return 0, err
	}
	return len(b), nil
}

// avErrorEvent is the AgentVault stream error of the JSON-RPC error
// response b; event, b's plain SSE event, when b is not an error.
func avErrorEvent(b, event []byte) []byte {
	var resp struct {
		Error *jsonrpc.Error `json:"error"`
	}
	if json.Unmarshal(b, &resp) != nil || resp.Error == nil {
		return event
	}
	data, err := json.Marshal(AVErrorEvent{Error: strconv.Itoa(resp.Error.Code), Message: resp.Error.Message})
	if err != nil {
		return event
	}
	return append(append([]byte("event: error\ndata: "), data...), '\n', '\n')
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines) of a stream.
func (w *sseErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package a2av1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// JSON-RPC 2.0: a response's id is the request's. The SDK's transport
// decodes the id into a Go value and encodes it again, so a number beyond
// 2^53 came back rounded (12345678901234567890 as 12345678901234567000), a
// number written 1.50 or 1e3 as 1.5 or 1000, and a string with escapes or
// with the characters encoding/json escapes (<, >, &) written otherwise.
// The binding writes the id as sent instead: its own answers carry the
// bytes of the request's id (rpcID, writeRPCError, NewStream), and a call
// whose id the SDK would write otherwise reaches the SDK with
// rpcIDPlaceholder in its place, which idWriter replaces in the SDK's
// answers with the id as sent.

// rpcIDPlaceholder is the id the SDK's transport gets in place of one it
// would not write back as sent: a string it echoes unchanged.
const rpcIDPlaceholder = `"e2a:rpc-id"`

// sdkAnswerHead is how every JSON-RPC response the SDK's transport writes
// for a call carrying rpcIDPlaceholder begins (its ServerResponse: jsonrpc,
// then id); paramsErrorWriter's rewrite begins so too.
var sdkAnswerHead = []byte(`{"jsonrpc":"2.0","id":` + rpcIDPlaceholder)

// rpcID is the id an answer to a call with id raw carries: raw as sent
// when it is a valid id, null when it is absent or not one (the SDK
// refuses those with id null).
func rpcID(raw json.RawMessage) json.RawMessage {
	if !jsonrpc.ValidID(raw) {
		return json.RawMessage("null")
	}
	return raw
}

// sdkEchoes reports whether the SDK's transport writes the valid id raw
// back as sent: decoded into a Go value (a number becomes a float64) and
// encoded again, the same bytes.
func sdkEchoes(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	b, err := json.Marshal(v)
	return err == nil && bytes.Equal(b, raw)
}

// rpcErrorJSON is the JSON-RPC error response to the call with id id (as
// sent: rpcID), in one line: jsonrpc.ErrorResponse's bytes, but for the
// id, which encoding/json would write with <, > and & escaped.
func rpcErrorJSON(id json.RawMessage, e *jsonrpc.Error) []byte {
	eb, err := json.Marshal(e)
	if err != nil {
		eb, _ = json.Marshal(jsonrpc.InternalError("the error could not be encoded"))
	}
	b := make([]byte, 0, len(eb)+len(id)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, rpcID(id)...)
	b = append(b, `,"error":`...)
	b = append(b, eb...)
	return append(b, '}')
}

// writeRPCError writes the JSON-RPC error response to the call with id id
// as the whole HTTP answer, with status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(rpcErrorJSON(id, e), '\n'))
}

// idWriter writes the SDK's answers to a call that reached it with
// rpcIDPlaceholder as its id (checkCall) with the id as sent instead.
// The SDK writes each answer, and each event of a stream, in one Write;
// the placeholder is replaced where an answer begins (sdkAnswerHead),
// which no JSON string in an answer can hold (its quotes are escaped).
type idWriter struct {
	passThrough
	head []byte // sdkAnswerHead with the id as sent
}

func newIDWriter(w http.ResponseWriter, id json.RawMessage) *idWriter {
	return &idWriter{passThrough: passThrough{w}, head: append([]byte(`{"jsonrpc":"2.0","id":`), id...)}
}

func (w *idWriter) Write(b []byte) (int, error) {
	if !bytes.Contains(b, sdkAnswerHead) {
		return w.ResponseWriter.Write(b)
	}
	if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(b, sdkAnswerHead, w.head)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// notification reports whether the call is a JSON-RPC notification: a
// valid JSON-RPC 2.0 request without an id member ("id": null is a
// request, answered with id null).
func (h rpcHead) notification() bool {
	return h.ID == nil && h.JSONRPC == "2.0" && h.Method != ""
}

// notify runs a JSON-RPC notification and answers, as /a2a does, 204 with
// no body (JSON-RPC 2.0 §4.1: no response), or its JSON-RPC error (id
// null) when it is refused before it is accepted (A2A defines no
// notifications; the A2A TCK expects the error). A SendMessage or
// SendStreamingMessage is published and recorded on its task, as
// with returnImmediately (the agent runs it; GetTask, ListTasks and
// SubscribeToTask follow it), answered once published; a SubscribeToTask
// has nothing to follow (its task is looked up: not found is its error);
// every other method is the SDK's, run to its end and its answer dropped
// unless it is an error. The SDK answered a notification as a call with id
// null, a SendStreamingMessage with the whole stream.
func (b *bindings) notify(w http.ResponseWriter, r *http.Request, head rpcHead, sdk http.Handler) {
	var err error
	switch head.Method {
	case "SendMessage", methodSendStreamingMessage:
		err = b.publishNotification(r, head)
	case methodSubscribeToTask:
		var req a2a.SubscribeToTaskRequest
		if err = json.Unmarshal(head.Params, &req); err != nil {
			err = fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
			break
		}
		zero := 0
		_, err = b.hd.GetTask(r.Context(), &a2a.GetTaskRequest{Tenant: req.Tenant, ID: req.ID, HistoryLength: &zero})
	default:
		rec := host.NewRecorder()
		sdk.ServeHTTP(&paramsErrorWriter{passThrough: passThrough{rec}}, r)
		if failedAnswer(rec) {
			rec.CopyTo(w)
			return
		}
	}
	if err != nil {
		writePlain(w, err, nil, false)
		return
	}
	jsonrpc.WriteNoReply(w)
}

// publishNotification publishes the message of a SendMessage or
// SendStreamingMessage notification and records it on its task, as the
// call would (handler.submit), without waiting for its answer.
func (b *bindings) publishNotification(r *http.Request, head rpcHead) error {
	var req a2a.SendMessageRequest
	if err := json.Unmarshal(head.Params, &req); err != nil {
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	method := normalizer.A2AMessageSend
	if head.Method == methodSendStreamingMessage {
		method = normalizer.A2AMessageStream
	}
	sub, _, err := b.hd.submit(r.Context(), &req, method, false)
	if err != nil {
		return err
	}
	sub.Done()
	return nil
}

// failedAnswer reports whether the answer rec kept is a JSON-RPC error
// response (a notification's answer is dropped unless it is one).
func failedAnswer(rec *host.Recorder) bool {
	var resp struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(rec.Body.Bytes(), &resp) == nil && len(resp.Error) > 0 && string(resp.Error) != "null"
}

package a2av1

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"google.golang.org/grpc"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// The A2A v1.0 interfaces: JSON-RPC at Path, the HTTP+JSON binding under
// it (Path + "/message:send", "/tasks/{id}"…), gRPC on the host's gRPC
// server.
const (
	Path = "/a2a/v1"
	// ListMax bounds the tasks ListTasks reads per call: the task index is
	// a key-value bucket, listed by scanning its keys, and a one-turn task
	// has no record (its request stands for it): the newest ListMax
	// requests are scanned too.
	ListMax = 10_000
	// GRPCAgentMetadata is the gRPC metadata key naming the agent pool of
	// a call (what ?agent= is over HTTP); absent, the routes and the
	// default pool decide.
	GRPCAgentMetadata = "x-e2a-agent"
)

// gateProtocol labels the v1.0 calls at the gate and in metrics: A2A's
// label, shared with v0.3.
const gateProtocol = "a2a"

// Bindings returns the three A2A v1.0 bindings over h, for the registry:
// the SDK's JSON-RPC and HTTP+JSON handlers and its gRPC service, thin
// adapters over one handler. Each call passes the host's gate (refusals
// in the binding's error shape) before the SDK decodes anything.
func Bindings(h Host) host.Bindings {
	hd := &handler{h: h}
	opts := []a2asrv.TransportOption{a2asrv.WithTransportKeepAlive(h.V1Answers().Heartbeat())}
	b := &bindings{h: h, hd: hd, log: sdkLogger(h)}
	return host.Bindings{
		// JSON-RPC refusals are JSON-RPC errors (the call's id when
		// it can be read: refuseRPCRead); the body is
		// checked first (v0.3 methods, batches), and SendStreamingMessage
		// is streamed by egress (streamRPC).
		JSONRPC: b.admit(refuseRPC, true,
			a2asrv.NewJSONRPCHandler(hd, opts...)),
		// message:stream is streamed by egress too (streamREST).
		// Its error answers get §5.4's HTTP statuses (specREST).
		REST:              b.admit(restRefuse, false, specREST(http.StripPrefix(Path, a2asrv.NewRESTHandler(hd, opts...)))),
		GRPC:              func(s grpc.ServiceRegistrar) { registerGRPC(s, hd, b.admitGRPC) },
		GRPCServerOptions: grpcServerOptions(),
	}
}

// bindings admits the calls of the bindings over the host.
type bindings struct {
	h   Host
	hd  *handler
	log *slog.Logger // the SDK's (sdkLogger)
}

// admit serves next after the host's gate (refusals written by refuse),
// the body bounded by the host's limit; for JSON-RPC (checkRPC) a batch or
// a v0.3 method name is answered here. The call's context carries what
// the handler reads of it.
func (b *bindings) admit(refuse host.Refuse, checkRPC bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// A cancel stays possible over the rate limit (host.WithCancel):
			// asked only of a call the rate limit refused, r (this
			// variable: the request as admitted) then read as far as
			// host.MaxCancelBody.
			r = r.WithContext(host.WithCancel(r.Context(), func() bool { return isCancel(r, checkRPC) }))
		}
		c, ok := b.h.AdmitBinding(w, r, gateProtocol, b.gateRefuse(r, refuse, checkRPC))
		if !ok {
			return
		}
		if !checkRPC && restTaskMethodRefused(w, r) {
			return
		}
		if r.Method == http.MethodPost && !jsonBody(r.Header.Get("Content-Type")) {
			refuseContentType(w, r, !checkRPC, b.h.MaxBody())
			return
		}
		limit := b.h.MaxBody()
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		var head rpcHead
		var body []byte
		if checkRPC {
			var ok bool
			if head, ok = checkCall(w, r, limit); !ok {
				return
			}
		} else if r.Method == http.MethodPost {
			var ok bool
			if body, ok = checkRESTBody(w, r, limit); !ok {
				return
			}
		}
		// The extensions the call activates, echoed (A2A §3.2.5).
		echoExtensions(w, r, head, checkRPC)
		if !checkRPC && !restCall(w, &r, body) {
			return // a tenant naming another pool (pooltenant.go), a query the gateway refuses (restQuery)
		}
		ctx := withCall(r.Context(), call{header: r.Header, agent: r.URL.Query().Get("agent"),
			version: requestedVersion(r), channel: "http", c: c, query: r.URL.Query(), r: r, body: body})
		r = r.WithContext(ctx)
		if head.placeholder {
			w = newIDWriter(w, head.ID)
		}
		if checkRPC && head.notification() {
			b.notify(w, r, head, next)
			return
		}
		if checkRPC {
			w = rpcWriter(w, head)
		}
		if extendedCardCall(r, head, checkRPC) {
			// Its scopes' form is the client's, as the public card's.
			w.Header().Add("Vary", "User-Agent")
			if !readsBareScopes(r) {
				w = newProtoScopesWriter(w, checkRPC)
			}
		}
		b.serve(w, r, head, checkRPC, refuse, next)
	})
}

// serve answers an admitted call: the streams and the refusals before
// one here, any other call with next.
func (b *bindings) serve(w http.ResponseWriter, r *http.Request, head rpcHead, checkRPC bool, refuse host.Refuse, next http.Handler) {
	switch {
	case b.refuseFinished(w, r, head, !checkRPC):
		// SubscribeToTask of a finished task: refused before a stream
		// opens (the SDK's transports open one first).
	case !checkRPC && r.Method == http.MethodHead && strings.HasSuffix(r.URL.Path, ":subscribe"):
		restStreamHead(w)
	case head.Method == methodSubscribeToTask || !checkRPC && strings.HasSuffix(r.URL.Path, ":subscribe"):
		b.holdSlot(w, r, head.ID, refuse, b.cutSlow(next))
	case checkRPC && head.nativeStream():
		b.streamRPC(w, r, head, next)
	case !checkRPC && r.Method == http.MethodPost && r.URL.Path == restStreamPath:
		b.streamREST(w, r, next)
	case checkRPC && head.Method == methodSendMessage, !checkRPC && r.Method == http.MethodPost && r.URL.Path == restSendPath:
		b.send(w, r, head.ID, !checkRPC, b.cutSlow(next))
	default:
		b.cutSlow(next).ServeHTTP(w, r)
	}
}

// cutSlow is next, a2a-go's handler, which writes its answers itself
// (SubscribeToTask's stream, a blocking SendMessage's answer, any other
// call's), with a client that stops reading cut off after the host's
// write timeout (egress.CutSlow), as egress's streams are: the SDK's
// writes have no deadline, and a SubscribeToTask held its stream, its
// read and its live subscription, a blocking send its answer, for as long
// as such a client kept its connection. What the SDK logs of a write that
// failed is logged at Debug (sdkLogger).
func (b *bindings) cutSlow(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, r, done := egress.CutSlow(w, r, b.h.WriteTimeout())
		defer done()
		cw, r := withSDKLog(w, r, b.log)
		next.ServeHTTP(cw, r)
	})
}

// send serves a SendMessage with next. A blocking one takes a stream slot
// (handler.submit), and one refused for want of it, or because its task
// has as many turns waiting as the pipeline allows (call.tooMany), is
// answered as every door answers it, 429 with Retry-After
// (host.TooManyStreams, host.TooManyTurns), where the SDK's transports
// answer the handler's error as an internal one: the refusal is written
// at the SDK's first write, which is discarded.
func (b *bindings) send(w http.ResponseWriter, r *http.Request, id json.RawMessage, rest bool, next http.Handler) {
	c, ok := callFrom(r.Context())
	if !ok {
		next.ServeHTTP(w, r)
		return
	}
	c.tooMany = new(host.Refusal)
	sw := &sendWriter{ResponseWriter: w, tooMany: c.tooMany, refuse: func() {
		if rest {
			refuseTooMany(w, nil, *c.tooMany, restRefuse)
		} else {
			refuseTooMany(w, id, *c.tooMany, refuseRPC)
		}
	}}
	next.ServeHTTP(sw, r.WithContext(withCall(r.Context(), c)))
}

// sendWriter is bindings.send's writer: the SDK's answer, or, once the
// handler refused the call (call.tooMany), the refusal alone.
type sendWriter struct {
	http.ResponseWriter
	tooMany *host.Refusal
	refuse  func()
	refused bool
}

// refusing writes the refusal at the first write of a refused call, and
// reports whether the call was refused.
func (w *sendWriter) refusing() bool {
	if !w.refused && w.tooMany.Status != 0 {
		w.refused = true
		w.refuse()
	}
	return w.refused
}

func (w *sendWriter) WriteHeader(code int) {
	if !w.refusing() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *sendWriter) Write(p []byte) (int, error) {
	if w.refusing() {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap is for http.ResponseController.
func (w *sendWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// restStreamHead answers a HEAD of an HTTP+JSON tasks/{id}:subscribe the
// task of which refuseFinished let through (known to the caller, running):
// the head its GET opens the stream with (the SDK's SSE headers), and no
// stream. The SDK's handler streamed the task to its end for a HEAD (net/http
// discards the body), holding a stream slot and the connection: the
// client's next request on it waited for the task to end; an unknown or
// finished task's HEAD was 200 where its GET is 404 or 400.
func restStreamHead(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// holdSlot serves a SubscribeToTask with next once the call has taken a
// stream slot, held until next returns (call.slotHeld): with none free it
// is refused 429 with Retry-After (host.TooManyStreams) before a stream opens.
// The SDK's transports would open the stream first and answer the
// handler's refusal in it as an internal error.
func (b *bindings) holdSlot(w http.ResponseWriter, r *http.Request, id json.RawMessage, refuse host.Refuse, next http.Handler) {
	c, _ := callFrom(r.Context())
	release, ok := c.c.AcquireStream()
	if !ok {
		refuseTooMany(w, id, host.TooManyStreams, refuse)
		return
	}
	defer release()
	c.slotHeld = true
	next.ServeHTTP(w, r.WithContext(withCall(r.Context(), c)))
}

// gateRefuse is how the gate's refusals are written: refuse, or for
// JSON-RPC (checkRPC) refuseRPCRead, which answers the call's id.
func (b *bindings) gateRefuse(r *http.Request, refuse host.Refuse, checkRPC bool) host.Refuse {
	if checkRPC {
		return refuseRPCRead(r, b.h.MaxBody())
	}
	return refuse
}

// rpcWriter wraps w for the JSON-RPC call head: its invalid params
// rewritten (paramsErrorWriter), DeleteTaskPushNotificationConfig's
// result answered as {} (emptyResultWriter).
func rpcWriter(w http.ResponseWriter, head rpcHead) http.ResponseWriter {
	if head.Method != "" {
		w = &paramsErrorWriter{passThrough: passThrough{w}, method: head.Method, params: head.Params}
	}
	if head.Method == methodDeletePushConfig {
		w = &emptyResultWriter{passThrough: passThrough{w}}
	}
	return w
}

// refuseRPC writes a refusal as a JSON-RPC error with id null (the
// gate's refusals answer the call's id: refuseRPCRead). A credential
// refused is a2a-go/v2's Unauthenticated (-31401) or Unauthorized (-31403) code: A2A v1.0 has
// none, and the pipeline's own (AgentVault's -32002, -32003) are v1.0's
// TaskNotCancelable and PushNotificationNotSupported, which @a2a-js/sdk
// reported for a missing key.
func refuseRPC(w http.ResponseWriter, f host.Refusal) { refuseRPCTo(w, nil, f) }

// refuseRPCTo is refuseRPC answering the call with id id (as sent; nil:
// null).
func refuseRPCTo(w http.ResponseWriter, id json.RawMessage, f host.Refusal) {
	f.RPCCode = refusalCode(f.RPCCode)
	if e, ok := refusalUnavailable(f); ok {
		// A temporary failure, as errUnavailable is answered: -32000 with
		// its RetryInfo beside the ErrorInfo.
		je := Error(e)
		f.RPCCode, f.Message, f.Data = je.Code, je.Message, je.Data
		if ra := retryAfter(e.TypedDetails); ra != "" && w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", ra)
		}
		writeRefusal(w, id, f)
		return
	}
	f.Data = typedDetails(f)
	writeRefusal(w, id, f)
}

// writeRefusal is host.RefuseJSONRPC with the id as sent (rpcErrorJSON:
// encoding/json would escape <, > and & in a string id; null when nil).
func writeRefusal(w http.ResponseWriter, id json.RawMessage, f host.Refusal) {
	f.SetHeaders(w.Header())
	writeRPCError(w, f.Status, id, &jsonrpc.Error{Code: f.RPCCode, Message: f.Message, Data: f.Data})
}

// refuseRPCRead is refuseRPC answering the id of r's call (JSON-RPC 2.0
// §5: null only when it cannot be read): the gate refuses before the
// body is read (a rate limit, a credential), so the refusal reads it then
// if its length is declared, at most limit bytes and
// host.MaxRefusalBody (host.RefusalBody); a body of unknown length or
// over it, a batch or one that is not JSON keeps id null, as the v0.3 and
// ACP doors answer (their Peek).
func refuseRPCRead(r *http.Request, limit int64) host.Refuse {
	return func(w http.ResponseWriter, f host.Refusal) {
		refuseRPCTo(w, peekRPCID(r, limit), f)
	}
}

// peekRPCID reads r's body (host.RefusalBody: a declared length, at most
// limit bytes and host.MaxRefusalBody) for the id of the one call it
// holds, for an answer refusing the call before it is decoded: nil (null)
// when there is no body, its length is unknown, it is larger, not JSON, a
// batch, or its id is absent or not a valid one.
func peekRPCID(r *http.Request, limit int64) json.RawMessage {
	body := host.RefusalBody(r, limit)
	if body == nil {
		return nil
	}
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &head) == nil && jsonrpc.ValidID(head.ID) && string(head.ID) != "null" {
		return head.ID
	}
	return nil
}

// refusalCode is a refusal's JSON-RPC code as this binding answers it: a
// credential refused is a2a-go/v2's Unauthenticated (-31401) or
// Unauthorized (-31403), the gate's codes (AgentVault's -32002, -32003)
// being v1.0's TaskNotCancelable and PushNotificationNotSupported.
func refusalCode(code int) int {
	switch code {
	case jsonrpc.CodeAuthentication:
		return jsonrpc.CodeA2AUnauthenticated
	case jsonrpc.CodeAuthorization:
		return jsonrpc.CodeA2AUnauthorized
	}
	return code
}

// typedDetails is a refusal's detail as A2A v1.0's JSON-RPC binding
// carries details (§9.5: error.data, an array of objects each with an
// @type): its data as a google.protobuf.Struct, its wait as a
// google.rpc.RetryInfo, then the ErrorInfo of the A2A error its code is
// (refusalCode; none for a code that is none, the rate limit's); nil for
// none. The gate's protocol-neutral data (a rate limit's {error, message,
// retry_after}) was written bare, which a client decoding the spec's
// details could not read; and without the ErrorInfo a2a-go/v2's HTTP+JSON
// client, which tells an error by its reason alone, read a 401 as an
// internal error.
func typedDetails(f host.Refusal) any {
	var out []*errordetails.Typed
	if f.Data != nil {
		var m map[string]any
		if b, err := json.Marshal(f.Data); err == nil && json.Unmarshal(b, &m) == nil && len(m) > 0 {
			out = append(out, errordetails.NewFromStruct(m))
		}
	}
	if f.RetryAfter > 0 {
		out = append(out, retryInfo(f.RetryAfter))
	}
	if code := refusalCode(f.RPCCode); code != 0 {
		for _, c := range rpcCodes {
			if c.code == code {
				out = append(out, errordetails.NewErrorInfo(a2a.ErrorReason(c.err), a2a.ProtocolDomain,
					map[string]string{"timestamp": now().UTC().Format(time.RFC3339)}))
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// refuseTooMany answers f (host.TooManyStreams, host.TooManyTurns) with
// refuse (the call's id in a JSON-RPC answer), its wait rendered from the
// refusal as any refusal's.
func refuseTooMany(w http.ResponseWriter, id json.RawMessage, f host.Refusal, refuse host.Refuse) {
	if id != nil {
		f.Data = typedDetails(f)
		writeRefusal(w, id, f)
		return
	}
	refuse(w, f)
}

// rpcHead is what checkCall reads of a JSON-RPC call.
type rpcHead struct {
	JSONRPC string `json:"jsonrpc"`
	// ID is the call's id as sent (nil when the member is absent: a
	// notification).
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	// placeholder: the SDK gets the call with rpcIDPlaceholder for its id,
	// which it would not write back as sent (rpcid.go); its answers go
	// through idWriter.
	placeholder bool
}

// nativeStream reports whether the call is a SendStreamingMessage the SDK
// would stream (a JSON-RPC 2.0 call whose id, if any, is a string, a
// number or null): streamRPC answers it. The SDK answers any other call,
// and these with a malformed envelope, in its own words.
func (h rpcHead) nativeStream() bool {
	return h.Method == methodSendStreamingMessage && h.JSONRPC == "2.0" && (len(h.ID) == 0 || jsonrpc.ValidID(h.ID))
}

// methodSendStreamingMessage is the JSON-RPC method streamRPC answers;
// methodSubscribeToTask the one ReplayExtension applies to.
const (
	methodSendStreamingMessage = "SendStreamingMessage"
	methodSubscribeToTask      = "SubscribeToTask"
	// methodSendMessage is the JSON-RPC method bindings.send answers.
	methodSendMessage = "SendMessage"
)

// restListPath is the HTTP+JSON binding's ListTasks (GET).
const restListPath = Path + "/tasks"

// restExtendedCardPath is the HTTP+JSON binding's GetExtendedAgentCard
// (GET).
const restExtendedCardPath = Path + "/extendedAgentCard"

// restStreamPath is the HTTP+JSON binding's SendStreamingMessage, which
// streamREST answers.
const restStreamPath = Path + "/message:stream"

// restSendPath is the HTTP+JSON binding's SendMessage (bindings.send).
const restSendPath = Path + "/message:send"

// streamREST is streamRPC for the HTTP+JSON binding's message:stream: the
// body is the SendMessageRequest, the stream NewRESTStream's. A body that
// cannot be read or decoded is handed to the SDK as it came, for its
// answer.
func (b *bindings) streamREST(w http.ResponseWriter, r *http.Request, sdk http.Handler) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		sdk.ServeHTTP(w, r)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req a2a.SendMessageRequest
	if json.Unmarshal(body, &req) != nil {
		sdk.ServeHTTP(w, r)
		return
	}
	b.stream(w, r, &req, sdk, nil, true, func(o *render.Output, requestID string, p a2amap.Params, from int64) *stream {
		return NewRESTStream(o, requestID, p, from).(*stream)
	})
}

// errReader fails every read with its error (a body that could not be
// read, handed on).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// streamRPC answers a JSON-RPC SendStreamingMessage with the SSE egress
// renders from the request's frames (NewStream): the events the SDK's
// transport would write for the handler's SendStreamingMessage, without
// the transport's goroutine, channel and flush per event. What is refused
// before the stream opens is still answered by the SDK, in its words: a
// params decode error (it decodes the params again), and the handler's
// refusal (submit's, the stream slots'), which its SendStreamingMessage
// yields when the call carries it (call.refusal).
func (b *bindings) streamRPC(w http.ResponseWriter, r *http.Request, head rpcHead, sdk http.Handler) {
	var req a2a.SendMessageRequest
	if len(head.Params) == 0 {
		sdk.ServeHTTP(w, r)
		return
	}
	if err := json.Unmarshal(head.Params, &req); err != nil {
		// Params that are no valid request: -32602 before a stream opens
		// (the SDK's stream said -32700, as if the body were no JSON:
		// paramsErrorWriter), in JSON's words.
		writePlain(w, decodeError("params", err), head.ID, false)
		return
	}
	b.stream(w, r, &req, sdk, head.ID, false, func(o *render.Output, requestID string, p a2amap.Params, from int64) *stream {
		return NewStream(o, requestID, p, head.ID, from).(*stream)
	})
}

// stream publishes req and has egress serve its frames with the renderer
// newRenderer builds; a refusal before the stream opens is handed to sdk
// (call.refusal) for its answer, but for a pool profile's, answered
// plainly (writePlain: a JSON-RPC call's id, or HTTP+JSON's when rest).
func (b *bindings) stream(w http.ResponseWriter, r *http.Request, req *a2a.SendMessageRequest, sdk http.Handler, id json.RawMessage, rest bool,
	newRenderer func(o *render.Output, requestID string, p a2amap.Params, from int64) *stream) {
	// A stream slot, and the frames subscribed to before the publish, as
	// the handler's SendStreamingMessage does.
	var sub *host.Submitted
	var p a2amap.Params
	err := a2aproto.CheckResumePoint(r)
	if err == nil {
		sub, p, err = b.hd.submit(r.Context(), req, normalizer.A2AMessageStream, true)
	} else {
		// A malformed resume point (Last-Event-ID, ?from=) is the client's
		// error, refused before the publish as the other doors refuse it
		// (InvalidParams): the message was published and the agent ran,
		// and only the stream answered the error.
		err = sdkError(err)
	}
	if f, ok := tooManyRefusal(err); ok {
		if rest {
			refuseTooMany(w, nil, f, restRefuse)
		} else {
			refuseTooMany(w, id, f, refuseRPC)
		}
		return
	}
	if err != nil && (plainRefusal(err) || rest) {
		// A pool's profile refused it: one plain error answer; and on
		// HTTP+JSON every refusal before the stream opens (a message to
		// a finished or unknown task, invalid params, a temporary failure
		// with Retry-After): the HTTP error answer with §5.4's status, as
		// message:send's (A2A v1.0 §11.6: the error code is mapped to the
		// HTTP status code), not a 200 stream whose one event is the
		// error, which proxies, retry policies and @a2a-js/sdk's REST
		// client (an SSE event that is no StreamResponse) take as an
		// answer. An error once events are sent ends the stream in it.
		writePlain(w, err, id, rest)
		return
	}
	if err != nil {
		// The SDK answers the refusal: the handler's SendStreamingMessage
		// yields it.
		c, _ := callFrom(r.Context())
		c.refusal = err
		sdk.ServeHTTP(w, r.WithContext(withCall(r.Context(), c)))
		return
	}
	defer sub.Done()
	c, _ := callFrom(r.Context())
	b.followStream(w, sub.Answering(r), c.c, sub.RequestID, p, newRenderer)
}

// followStream serves the stream of the task's turn requestID and then,
// when its end is not the task's because the task's record lists a later
// turn (stream.later), that turn's events in the same response, from its
// first frame as a resubscription's (no Task first; each event id
// "<requestID>:<seq>", as a multi-turn v0.3 stream names them), and so on
// to the task's terminal state (a2aproto.ServeFollowed, which also resumes
// in a later turn), as the gRPC binding's stream follows them
// (handler.SendStreamingMessage, a2aproto.Answers.A2AFollow).
func (b *bindings) followStream(w http.ResponseWriter, r *http.Request, c host.BindingCaller, requestID string, p a2amap.Params,
	newRenderer func(o *render.Output, requestID string, p a2amap.Params, from int64) *stream) {
	later := a2aproto.LaterTurns(c, cmp.Or(p.TaskID, requestID))
	first := p
	a2aproto.ServeFollowed(b.h.Serve, StreamFormat, w, r, requestID, later, func(o *render.Output, t a2aproto.FollowedTurn) (render.Renderer, func() (string, bool)) {
		p := first
		if t.Followed {
			p = a2amap.Params{TaskID: p.TaskID, ContextID: p.ContextID, Resubscribe: true, Interaction: p.Interaction,
				AcceptedOutputModes: p.AcceptedOutputModes}
		}
		s := newRenderer(o, t.ID, p, t.From)
		s.continued, s.followed = t.Opened, t.Followed
		s.later = later.After(r.Context(), t.ID)
		return s, func() (string, bool) { return s.next, s.done }
	})
}

// checkCall reads a JSON-RPC body and answers what the SDK's transport
// would answer poorly: a v0.3 method name gets a -32601 that says where
// v0.3 is served (the SDK would answer a bare "method not found"), a batch
// a -32600 (the SDK reads one call and would answer -32602 with a Go type
// error; A2A defines no batches). Otherwise r's body is the body read,
// and the head is what could be read of the call (zero if it is no JSON
// object: the SDK answers that).
func checkCall(w http.ResponseWriter, r *http.Request, limit int64) (head rpcHead, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		refuseRPC(w, host.Refusal{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest,
			Message: "Invalid Request: body exceeds " + strconv.FormatInt(limit, 10) + " bytes"})
		return head, false
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		_ = jsonrpc.WriteError(w, nil, jsonrpc.InvalidRequest("batches are not supported on the A2A v1.0 interface; send each call alone"))
		return head, false
	}
	if !checkEnvelope(w, body) {
		return head, false
	}
	if json.Unmarshal(body, &head) != nil {
		head = rpcHead{}
	} else if strings.Contains(head.Method, "/") {
		writeRPCError(w, http.StatusOK, head.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found: " +
			jsonrpc.QuoteForMessage(head.Method) + ": a method of A2A v0.3, served at /a2a (this endpoint speaks A2A v1.0)"})
		return head, false
	} else if body, err = sdkCall(body, &head); err != nil {
		writePlain(w, err, head.ID, false)
		return head, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return head, true
}

// sdkCall is the call body as the SDK's transport gets it: its params
// with JSON names and numbers (ProtoJSON), or {} for none (callParams),
// and an id the SDK would not write back as sent replaced by
// rpcIDPlaceholder (head.placeholder). head's params are updated; its id
// stays the one sent. body itself when nothing changes; an error (params
// that ProtoJSON refuses: protoJSON) is InvalidParams.
func sdkCall(body []byte, head *rpcHead) ([]byte, error) {
	p, err := callParams(head.Method, head.Params)
	if err != nil {
		return body, err
	}
	placeholder := jsonrpc.ValidID(head.ID) && !sdkEchoes(head.ID)
	if !placeholder && bytes.Equal(p, head.Params) {
		return body, nil
	}
	var call map[string]json.RawMessage
	if json.Unmarshal(body, &call) != nil || call == nil {
		return body, nil
	}
	call["params"] = p
	if placeholder {
		call["id"] = json.RawMessage(rpcIDPlaceholder)
	}
	b, err := json.Marshal(call)
	if err != nil {
		return body, nil
	}
	head.Params, head.placeholder = p, placeholder
	return b, nil
}

// checkEnvelope answers, as the other JSON-RPC doors (package jsonrpc's
// Decode) do, a body the SDK's transport reads wrongly, and reports whether
// the call goes on: not one JSON value (data after it, which the SDK's
// json.Decoder leaves unread and acts on the call before it; invalid UTF-8)
// is -32700; no object, or a "jsonrpc" or "method" that is no string, is
// -32600 (the SDK said -32602 with a Go decoding error), to the call's id
// when it has a valid one.
func checkEnvelope(w http.ResponseWriter, body []byte) bool {
	if !jsonBodyValid(body) {
		writePlain(w, fmt.Errorf("%w: the body is not one JSON value", a2a.ErrParseError), nil, false)
		return false
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); t[0] != '{' {
		writePlain(w, fmt.Errorf("%w: a request must be a JSON object", a2a.ErrInvalidRequest), nil, false)
		return false
	}
	var head struct {
		ID      json.RawMessage `json:"id"`
		JSONRPC any             `json:"jsonrpc"`
		Method  any             `json:"method"`
	}
	_ = json.Unmarshal(body, &head)
	_, okVersion := head.JSONRPC.(string)
	_, okMethod := head.Method.(string)
	if (head.JSONRPC == nil || okVersion) && (head.Method == nil || okMethod) {
		return true // the SDK answers a missing member or a wrong version
	}
	var id json.RawMessage
	if len(head.ID) > 0 && (head.ID[0] == '"' || head.ID[0] == '-' || head.ID[0] >= '0' && head.ID[0] <= '9') {
		id = head.ID
	}
	writePlain(w, fmt.Errorf("%w: \"jsonrpc\" and \"method\" must be strings", a2a.ErrInvalidRequest), id, false)
	return false
}

// jsonBodyValid reports whether body is exactly one JSON value in valid
// UTF-8 (encoding/json would replace invalid bytes with U+FFFD).
func jsonBodyValid(body []byte) bool {
	return utf8.Valid(body) && json.Valid(body)
}

// checkRESTBody reads the body of an HTTP+JSON POST (bounded by limit) and
// answers, in the binding's error shape, one over the limit (413, as every
// other door: the SDK read the cut body as a parse error) and a non-empty
// one that is not one JSON value (400: the SDK's json.Decoder read the first
// value and acted on it, trailing data unread). A body is a request of
// a2a.proto in ProtoJSON, read as JSON-RPC's params are (protoJSON: proto
// field names, integers and enums in ProtoJSON's other forms), what
// ProtoJSON refuses 400 INVALID_ARGUMENT. It reports whether the call
// goes on, r's body then the body as the SDK reads it, which it returns.
func checkRESTBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			restRefuse(w, host.Refusal{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest,
				Message: "request body exceeds " + strconv.FormatInt(limit, 10) + " bytes"})
			return nil, false
		}
		writePlain(w, fmt.Errorf("%w: the body could not be read", a2a.ErrParseError), nil, true)
		return nil, false
	}
	if len(bytes.TrimSpace(body)) > 0 && !jsonBodyValid(body) {
		writePlain(w, fmt.Errorf("%w: the body is not one JSON value", a2a.ErrParseError), nil, true)
		return nil, false
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if body, err = protoJSON(restBodyMethod(r.URL.Path), body); err != nil {
			writePlain(w, err, nil, true)
			return nil, false
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// restBodyMethod is the method whose request an HTTP+JSON POST to path
// carries as its body, for protoJSON's protoFields: message:send's and
// message:stream's (the others' bodies, a push config, a cancel, have no
// integer or enum: "", whose body protoJSON reads for names alone).
func restBodyMethod(path string) string {
	switch {
	case strings.HasSuffix(path, "/message:send"):
		return methodSendMessage
	case strings.HasSuffix(path, "/message:stream"):
		return methodSendStreamingMessage
	}
	return ""
}

// callParams is a call of method's params as the SDK reads them
// (protoJSON), and {} when the call has none. JSON-RPC 2.0 lets a call
// leave them out (the spec's GetExtendedAgentCard example does), and the
// SDK's decoding of nothing was a parse error.
func callParams(method string, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 {
		return json.RawMessage(`{}`), nil
	}
	return protoJSON(method, params)
}

// requestedVersion is the A2A-Version the client asked for: the header, or
// the request parameter of that name. An absent one is taken as 1.0 here
// (the spec assumes 0.3 when it is absent; this interface serves 1.0 only,
// and curl users rarely send it).
func requestedVersion(r *http.Request) string {
	if v := strings.TrimSpace(r.Header.Get(a2a.SvcParamVersion)); v != "" {
		return v
	}
	return strings.TrimSpace(r.URL.Query().Get(a2a.SvcParamVersion))
}

// refuseFinished answers SubscribeToTask on a task in a terminal state
// with UnsupportedOperationError (A2A v1.0 §3.1.6), on one the caller
// does not have with TaskNotFoundError, one without the task's id with
// InvalidParams (errTaskIDRequired), and one whose tenant the handler
// refuses (readCall) with its InvalidParams, as a plain error answer,
// as the specification's examples show it (the SDK's transports would
// open the stream first and send the error as its one event; the SDK's
// HTTP+JSON handler answered no id InvalidRequest), and reports
// whether it did. A call that activates ReplayExtension (but for no id),
// any other call, and a task the caller has not or that is not finished
// are the handler's to answer.
func (b *bindings) refuseFinished(w http.ResponseWriter, r *http.Request, head rpcHead, rest bool) bool {
	var id, tenant string // tenant: a JSON-RPC call's (restCall made an HTTP+JSON call's its pool)
	switch {
	case rest:
		p, ok := strings.CutSuffix(r.URL.Path, ":subscribe")
		if !ok || (r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodHead) {
			return false
		}
		id, ok = strings.CutPrefix(p, Path+"/tasks/")
		if !ok || strings.Contains(id, "/") {
			return false
		}
	case head.Method == methodSubscribeToTask && head.JSONRPC == "2.0":
		var req a2a.SubscribeToTaskRequest
		if err := json.Unmarshal(head.Params, &req); err != nil {
			// Params of the wrong shape: InvalidParams as one plain
			// answer, in JSON's words (the SDK's stream sent it as its
			// one event, naming Go's types).
			writePlain(w, decodeError("params", err), head.ID, rest)
			return true
		}
		id, tenant = string(req.ID), req.Tenant
	default:
		return false
	}
	if id == "" {
		// No task's id: InvalidParams, as GetTask's (it opened a stream
		// whose one event was the error).
		writePlain(w, errTaskIDRequired, head.ID, rest)
		return true
	}
	if ReplayRequested(r.Header) {
		return false
	}
	// On HTTP+JSON the error's ErrorInfo names the task (metadata.taskId),
	// as GET /tasks/{id}'s and POST /tasks/{id}:cancel's do.
	plain := func(err error) {
		if rest {
			writeREST(w, restTaskError(err, id))
			return
		}
		writePlain(w, err, head.ID, false)
	}
	if _, err := b.hd.readCall(r.Context(), tenant); err != nil {
		// The request's tenant, checked first as the handler checks it
		// (pooltenant.go): one naming no valid pool, or another pool
		// than the interface's, is InvalidParams whatever the task.
		plain(err)
		return true
	}
	if err := b.hd.subscribeRefusal(r.Context(), id); err != nil {
		// The task's pool does not stream (its profile).
		plain(err)
		return true
	}
	zero := 0
	t, err := b.hd.GetTask(r.Context(), &a2a.GetTaskRequest{ID: a2a.TaskID(id), HistoryLength: &zero})
	if errors.Is(err, a2a.ErrTaskNotFound) {
		// An unknown task (or another's) is TaskNotFoundError the same
		// way (HTTP 404 on HTTP+JSON), not a stream whose one event is
		// the error.
		plain(err)
		return true
	}
	if err != nil || !t.Status.State.Terminal() {
		return false
	}
	plain(finishedError(t.ID, t.Status.State))
	return true
}

// methodCancelTask is the method that cancels a task.
const methodCancelTask = "CancelTask"

// isCancel reports whether r is a CancelTask: for JSON-RPC (checkRPC) a
// single, valid call of it, its body (at most host.MaxCancelBody bytes
// read) put back for the handler; over HTTP+JSON a POST of
// /tasks/{id}:cancel (a path tenant's too), whatever its body.
func isCancel(r *http.Request, checkRPC bool) bool {
	if checkRPC {
		body, whole := host.PeekBody(r, host.MaxCancelBody)
		return whole && host.IsCancelCall(body, func(m string) bool { return m == methodCancelTask })
	}
	_, route := pathTenant(r.URL.Path)
	_, ok := restCancelTask(r.Method, route)
	return ok
}

// restCancelTask is the task an HTTP+JSON call of method on route (a path
// tenant taken off) cancels: ok for a POST of /tasks/{id}:cancel.
func restCancelTask(method, route string) (id string, ok bool) {
	if method != http.MethodPost {
		return "", false
	}
	id, ok = strings.CutPrefix(route, restListPath+"/")
	if !ok {
		return "", false
	}
	id, ok = strings.CutSuffix(id, ":cancel")
	return id, ok && id != "" && !strings.Contains(id, "/")
}

// restTaskMethodRefused answers 405 with Allow: GET, HEAD an HTTP+JSON
// call of /tasks/{id} (a path tenant's too) with another method than GET
// or HEAD, when the path names no method (:cancel, :subscribe), and
// reports whether it did. The SDK's router takes POST for every
// /tasks/{id…}: it answered POST /tasks/{id} 400 "invalid request", and
// DELETE or PUT 405 with Allow listing POST.
func restTaskMethodRefused(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	_, route := pathTenant(r.URL.Path)
	id, ok := strings.CutPrefix(route, restListPath+"/")
	if !ok || id == "" || strings.Contains(id, "/") || strings.HasSuffix(id, ":cancel") || strings.HasSuffix(id, ":subscribe") {
		return false
	}
	w.Header().Set("Allow", "GET, HEAD")
	restRefuse(w, host.Refusal{Status: http.StatusMethodNotAllowed, Message: "method not allowed here; use GET, HEAD"})
	return true
}

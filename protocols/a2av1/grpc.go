package a2av1

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// grpcServerOptions are what the binding's service needs of the gRPC
// server it is registered on: its codec (serverCodec), so that a stream's
// request that does not decode is answered by the service.
func grpcServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(serverCodec{encoding.GetCodecV2(grpcproto.Name)})}
}

// registerGRPC registers the SDK's gRPC service (a2agrpc) over hd on s,
// each of its methods admitted by admit before the SDK decodes anything
// of the call: the gate belongs to the service, not to the server, so the
// server's other services (reflection: the schema is public, as the card
// is) take no credentials.
//
// A streaming call whose client stops reading is cut off after the
// host's write timeout, as the HTTP bindings' streams are (cutSlow).
func registerGRPC(s grpc.ServiceRegistrar, hd *handler, admit func(context.Context) (context.Context, error)) {
	a2apb.RegisterA2AServiceServer(gatedRegistrar{ServiceRegistrar: s, admit: admit, writeTimeout: hd.h.WriteTimeout()}, a2agrpc.NewHandler(hd))
}

// gatedRegistrar registers services whose method handlers admit each call
// first, and whose streams cut off a client that does not read within
// writeTimeout (none when ≤ 0).
type gatedRegistrar struct {
	grpc.ServiceRegistrar
	admit        func(context.Context) (context.Context, error)
	writeTimeout time.Duration
}

func (g gatedRegistrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i := range d.Methods {
		next := d.Methods[i].Handler
		cancel := d.Methods[i].MethodName == methodCancelTask
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			if cancel {
				// Stays possible over the rate limit (host.WithCancel).
				ctx = host.WithCancel(ctx, isCancelCall)
			}
			ctx, err := g.admit(ctx)
			if err != nil {
				return nil, err
			}
			resp, err := next(srv, ctx, checkedDecoder(ctx, dec), intercept)
			if c, ok := callFrom(ctx); ok && err != nil && c.tooMany != nil && c.tooMany.Status != 0 {
				// A blocking SendMessage refused for want of a stream
				// slot, or a message to a task with as many turns
				// waiting as allowed: as every door answers it.
				return nil, gateStatus(*c.tooMany)
			}
			if l, ok := resp.(*a2apb.ListTaskPushNotificationConfigsResponse); ok && err == nil {
				// The next page's token, which the SDK's conversion drops
				// (its configs would be the first page only).
				if c, ok := callFrom(ctx); ok && c.nextPageToken != nil {
					l.NextPageToken = *c.nextPageToken
				}
			}
			return resp, specStatus(unavailableStatus(err))
		}
	}
	d.Streams = slices.Clone(desc.Streams)
	for i := range d.Streams {
		next := d.Streams[i].Handler
		// A method taking one request message is registered as taking a
		// stream of them, and its stream counts them (ctxStream.one):
		// gRPC's count writes its own INTERNAL status when the client sends
		// none or several (serverStream.RecvMsg), before the handler sees
		// the error.
		one := !d.Streams[i].ClientStreams
		d.Streams[i].ClientStreams = true
		d.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error {
			ctx, err := g.admit(ss.Context())
			if err != nil {
				return err
			}
			err = cutSlow(g.writeTimeout, srv, next, &ctxStream{ServerStream: ss, ctx: ctx, one: one})
			if c, ok := callFrom(ctx); ok && err != nil && c.tooMany != nil && c.tooMany.Status != 0 {
				// Refused for want of a stream slot, or for the turns its
				// task has waiting: as every door answers it (the SDK's
				// transport says internal error).
				return gateStatus(*c.tooMany)
			}
			return specStatus(unavailableStatus(err))
		}
	}
	g.ServiceRegistrar.RegisterService(&d, impl)
}

// errSlowClient ends a stream whose client did not take a message within
// the write timeout: UNAVAILABLE (the task runs on; SubscribeToTask
// resumes it), as an HTTP stream's client is disconnected then.
var errSlowClient = status.Error(codes.Unavailable, "slow client: a message waited longer than the write timeout to be sent")

// cutSlow serves the stream cs with next and returns its error, unless one
// of its messages waits longer than timeout to be sent: grpc-go's SendMsg
// waits, with no deadline, for the stream's flow-control window that only
// the client's reads open again, so a client that stops reading held its
// stream (the handler, its reader and live subscription, its stream slot)
// for as long as its connection lived. Then cutSlow returns
// errSlowClient at once, while next still waits in SendMsg: gRPC writes
// the status, which ends the stream's transport context, and the waiting
// SendMsg returns with the stream done, ending next (which nothing waits
// for); the call's context ends first with the cause egress.ErrSlowClient,
// which the stream's read counts as a slow client. The messages already
// queued stay bounded by the stream's write quota.
func cutSlow(timeout time.Duration, srv any, next grpc.StreamHandler, cs *ctxStream) error {
	if timeout <= 0 {
		return next(srv, cs)
	}
	ctx, cancel := context.WithCancelCause(cs.ctx)
	cs.ctx = ctx
	stalled := make(chan struct{})
	var once sync.Once
	cs.timeout = timeout
	// Once: a send that the window let through as the timer fired is
	// followed by another, which may wait again.
	cs.timer = time.AfterFunc(time.Hour, func() { once.Do(func() { close(stalled) }) })
	cs.timer.Stop()
	done := make(chan error, 1)
	go func() { done <- next(srv, cs) }()
	select {
	case err := <-done:
		cs.timer.Stop()
		cancel(nil)
		return err
	case <-stalled:
		// The call's reads end too, their answer counted slow_client
		// (egress.CountedAs).
		cancel(egress.ErrSlowClient)
		return errSlowClient
	}
}

// isCancelCall is the cancel test of a gRPC CancelTask: its method says
// it.
func isCancelCall() bool { return true }

// unavailableStatus is err, but UNAVAILABLE with a RetryInfo of a second
// for errUnavailable, which the SDK's transport answers INTERNAL (a
// permanent failure to gRPC clients and retry policies). The SDK's
// ErrorInfo (SERVER_ERROR) is kept, as JSON-RPC and HTTP+JSON write it
// beside their RetryInfo (A2A v1.0 §10.6: an A2A error's status MUST
// carry it); the SDK's Struct copy of the retry delay is dropped for the
// RetryInfo itself.
func unavailableStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil || st.Code() != codes.Internal || st.Message() != errUnavailable.Error() {
		return err
	}
	var infos []protoadapt.MessageV1
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			infos = append(infos, info)
		}
	}
	return refusalStatus(codes.Unavailable, st.Message(), unavailableRetry, infos...)
}

// ctxStream is a server stream with the call's context, whose request is
// checked as it is received (checkedDecoder); req is where it is received
// (recv). With one, the method takes one request message, which the
// stream's RecvMsg receives and then waits for the client's end of
// sending, as gRPC's does for a method so declared.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
	req streamRequest
	one bool
	// timer, when set (cutSlow), runs while a message waits to be sent,
	// up to timeout.
	timer   *time.Timer
	timeout time.Duration
}

func (c *ctxStream) Context() context.Context { return c.ctx }

// SendMsg sends m, timed by the stream's timer when it has one.
func (c *ctxStream) SendMsg(m any) error {
	if c.timer == nil {
		return c.ServerStream.SendMsg(m)
	}
	c.timer.Reset(c.timeout)
	err := c.ServerStream.SendMsg(m)
	c.timer.Stop()
	return err
}

func (c *ctxStream) RecvMsg(m any) error { return checkedDecoder(c.ctx, c.recv)(m) }

// recv is the stream's RecvMsg of m, a request message, received as a
// streamRequest: on a server with the binding's codec (serverCodec), a
// message that does not decode is answered as a unary call's is
// (parseError, in the words gRPC gives a unary call's), where gRPC's
// RecvMsg would fail and write its own INTERNAL status before the
// handler saw the error. Elsewhere the request decodes as it would
// without the wrapper. A method taking one request (c.one) that gets
// none, or more than one, answers as one whose request does not decode,
// in gRPC's words (gRPC's own answer is INTERNAL, a server's failure).
func (c *ctxStream) recv(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return c.ServerStream.RecvMsg(m)
	}
	c.req = streamRequest{Message: pm}
	if err := c.ServerStream.RecvMsg(&c.req); errors.Is(err, io.EOF) && c.one {
		return parseError(noRequest)
	} else if err != nil {
		return err
	}
	if c.req.err != nil {
		return parseError("grpc: error unmarshalling request: " + c.req.err.Error())
	}
	if !c.one {
		return nil
	}
	// Only the client's end of sending may follow: a message is refused
	// (decoded over the first, which is not handled then).
	if err := c.ServerStream.RecvMsg(&c.req); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		return err
	}
	return parseError(severalRequests)
}

// noRequest and severalRequests are what gRPC says of a call to a method
// taking one request message that sends none, or more than one.
const (
	noRequest       = "cardinality violation: received no request message from non-client-streaming RPC"
	severalRequests = "cardinality violation: received multiple request messages for non-client-streaming RPC"
)

// streamRequest is a stream's request message, which serverCodec decodes,
// its error recorded in err rather than returned to gRPC. It is the
// message to any other codec (its ProtoReflect is the message's).
type streamRequest struct {
	proto.Message
	err error
}

// serverCodec is gRPC's proto codec, but for a streamRequest, whose
// decoding error it records in the request and does not return: gRPC's
// stream would answer it INTERNAL itself (grpc-go's serverStream.RecvMsg
// writes the status of a decoding error), a server's failure to clients
// and retry policies, before the handler could answer INVALID_ARGUMENT.
// It is the codec of the gRPC server the binding is registered on
// (host.Bindings.GRPCServerOptions: grpc.ForceServerCodecV2); what
// decodes costs what it does with gRPC's codec.
type serverCodec struct{ encoding.CodecV2 }

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*streamRequest); ok {
		r.err = c.CodecV2.Unmarshal(data, r.Message)
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// checkedDecoder is dec, the SDK's decoding of a call's proto request,
// which then records in the call of ctx (call.invalid) what checkProto
// refuses of the request; the handler answers it, in the SDK's gRPC
// shape.
func checkedDecoder(ctx context.Context, dec func(any) error) func(any) error {
	return func(m any) error {
		if err := dec(m); err != nil {
			return undecodable(err)
		}
		if r, ok := m.(*a2apb.SendMessageRequest); ok && r.GetMessage() != nil && r.GetMessage().GetRole() == a2apb.Role_ROLE_UNSPECIFIED {
			// The SDK's conversion refuses it before the handler, with no
			// ErrorInfo: refused as the other bindings refuse it (errRole).
			return refusalStatus(codes.InvalidArgument, errRole.Error(), 0, &errdetails.ErrorInfo{
				Reason: a2a.ErrorReason(a2a.ErrInvalidParams), Domain: a2a.ProtocolDomain,
				Metadata: map[string]string{"timestamp": now().UTC().Format(time.RFC3339)}})
		}
		c, ok := callFrom(ctx)
		if ok && c.invalid != nil && *c.invalid == nil {
			*c.invalid = checkProto(m)
		}
		if ok && c.protoTenant != nil {
			// The SDK's conversion of these drops their tenant (the
			// handler checks it as on the other bindings: readCall).
			switch r := m.(type) {
			case *a2apb.CancelTaskRequest:
				*c.protoTenant = r.GetTenant()
			case *a2apb.SubscribeToTaskRequest:
				*c.protoTenant = r.GetTenant()
			}
		}
		return nil
	}
}

// undecodable is err, the error of decoding a call's request, but a
// request that is not the method's protobuf (gRPC's "error unmarshalling
// request", which it answers INTERNAL: a server's failure, that clients
// report or retry) is INVALID_ARGUMENT with the SDK's ErrorInfo of a
// parse error (parseError), as the HTTP+JSON binding answers a body it
// cannot read (A2A v1.0 §3.3.2: a client's malformed message is a
// validation error). A stream's is answered so by recv.
func undecodable(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Internal || !strings.Contains(st.Message(), "unmarshal") {
		return err
	}
	return parseError(st.Message())
}

// parseError is the status of a request message that does not decode:
// INVALID_ARGUMENT, msg, with the SDK's ErrorInfo of a parse error.
func parseError(msg string) error {
	return refusalStatus(codes.InvalidArgument, msg, 0, &errdetails.ErrorInfo{
		Reason: a2a.ErrorReason(a2a.ErrParseError), Domain: a2a.ProtocolDomain,
		Metadata: map[string]string{"timestamp": now().UTC().Format(time.RFC3339)}})
}

// checkProto refuses what the SDK's conversion of a proto request
// (pbconv) would lose before the handler sees it: a negative
// historyLength (GetTask, ListTasks, SendMessage's configuration), which
// it drops, so that it read as no limit; a ListTasks status that is no
// TaskState (an open enum's unknown number), which it reads as no filter,
// so that every task was listed; JSON-RPC and HTTP+JSON answer both
// InvalidParams, and so does gRPC.
func checkProto(m any) error {
	var n int32
	name := "historyLength"
	switch r := m.(type) {
	case *a2apb.GetTaskRequest:
		n = r.GetHistoryLength()
	case *a2apb.ListTasksRequest:
		if _, ok := a2apb.TaskState_name[int32(r.GetStatus())]; !ok {
			return fmt.Errorf("%w: status %d is not a task state", a2a.ErrInvalidParams, r.GetStatus())
		}
		n = r.GetHistoryLength()
	case *a2apb.SendMessageRequest:
		n, name = r.GetConfiguration().GetHistoryLength(), "configuration.historyLength"
	}
	if n < 0 {
		return fmt.Errorf("%w: %s must not be negative", a2a.ErrInvalidParams, name)
	}
	return nil
}

// admitGRPC is the gate of a gRPC call: its metadata read as headers and
// admitted by the host (credentials then removed, the rate limit
// charged), refusals answered as gRPC statuses (Unauthenticated,
// PermissionDenied, ResourceExhausted, Unavailable); the call context
// then carries what the handler reads.
func (b *bindings) admitGRPC(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	header := http.Header{}
	for k, vs := range md {
		if strings.HasPrefix(k, ":") || strings.HasSuffix(k, "-bin") {
			continue
		}
		for _, v := range vs {
			header.Add(k, v)
		}
	}
	c, f, err := b.h.AdmitHeader(ctx, header, gateProtocol, "grpc")
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if f != nil {
		return nil, gateStatus(*f)
	}
	echoGRPCExtensions(ctx, header) // the extensions the call activates (A2A §3.2.5)
	return withCall(ctx, call{header: header, agent: header.Get(GRPCAgentMetadata),
		version: strings.TrimSpace(header.Get(a2a.SvcParamVersion)), channel: "grpc", c: c, invalid: new(error), tooMany: new(host.Refusal),
		protoTenant: new(string), nextPageToken: new(string)}), nil
}

// gateStatus is the gRPC status of a refusal f of the gate or the host (a
// stream slot's): its code by f.Code (grpcCode), its wait as a RetryInfo;
// a temporary failure named as the other bindings name it.
func gateStatus(f host.Refusal) error {
	code := grpcCode(f.Code)
	if code == codes.Unavailable {
		return refusalStatus(code, f.Message, cmp.Or(f.RetryAfter, unavailableRetry), serverErrorInfo())
	}
	return refusalStatus(code, f.Message, f.RetryAfter)
}

// refusalStatus is the gRPC status of a refusal, its details (an
// ErrorInfo) then a google.rpc.RetryInfo saying how long the client should
// wait before it retries (the HTTP bindings' Retry-After, which gRPC has
// no header for: the same whole seconds, host.WaitSeconds).
func refusalStatus(code codes.Code, msg string, retry time.Duration, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	if retry > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: host.WaitSeconds(retry)}})
	}
	if len(details) == 0 {
		return st.Err()
	}
	if d, err := st.WithDetails(details...); err == nil {
		st = d
	}
	return st.Err()
}

// serverErrorInfo is the ErrorInfo of a temporary failure the gate
// refuses (its rate limiter unavailable): the SDK's ServerError, as
// JSON-RPC and HTTP+JSON name it (refusalUnavailable).
func serverErrorInfo() *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: a2a.ErrorReason(a2a.ErrServerError), Domain: a2a.ProtocolDomain,
		Metadata: map[string]string{"timestamp": now().UTC().Format(time.RFC3339)}}
}

// grpcCode is the gRPC status of a refusal of the gate, by its code.
func grpcCode(code string) codes.Code {
	switch code {
	case "unauthenticated":
		return codes.Unauthenticated
	case "forbidden":
		return codes.PermissionDenied
	case "unavailable":
		return codes.Unavailable
	}
	return codes.ResourceExhausted
}

// unimplementedReasons are the A2A errors whose gRPC status is
// UNIMPLEMENTED (A2A v1.0 §5.4), which the SDK's transport answers as
// FAILED_PRECONDITION: PushNotificationNotSupportedError and
// VersionNotSupportedError. UnsupportedOperationError (also UNIMPLEMENTED
// in §5.4) keeps the SDK's FAILED_PRECONDITION: a2a-go/v2's client reads
// a status back only with the code its table pairs with the reason, and
// that error is what a2a-go/v2 clients of the pipeline meet daily
// (a message to a finished task); docs/a2a-tck.md records it.
var unimplementedReasons = map[string]bool{
	a2a.ErrorReason(a2a.ErrPushNotificationNotSupported): true,
	a2a.ErrorReason(a2a.ErrVersionNotSupported):          true,
}

// specStatus is err with the gRPC code §5.4 gives its A2A error
// (unimplementedReasons, and UnsupportedOperationError for a capability
// the card does not declare: CapabilityUnsupported), its message and
// details kept.
func specStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil || st.Code() != codes.FailedPrecondition {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != a2a.ProtocolDomain || !unimplementedReasons[info.GetReason()] &&
			(info.GetReason() != a2a.ErrorReason(a2a.ErrUnsupportedOperation) || info.GetMetadata()[capabilityKey] == "") {
			continue
		}
		p := st.Proto()
		p.Code = int32(codes.Unimplemented)
		return status.FromProto(p).Err()
	}
	return err
}

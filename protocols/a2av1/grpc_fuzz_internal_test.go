package a2av1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// rawCodec sends a call's bytes as they are: the fuzzer's, not a
// message's encoding.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// fuzzGRPCMethods are the A2A v1.0 gRPC methods FuzzGRPCMessages calls,
// the streaming ones last.
var fuzzGRPCMethods = []string{
	a2apb.A2AService_SendMessage_FullMethodName, a2apb.A2AService_GetTask_FullMethodName,
	a2apb.A2AService_ListTasks_FullMethodName, a2apb.A2AService_CancelTask_FullMethodName,
	a2apb.A2AService_CreateTaskPushNotificationConfig_FullMethodName, a2apb.A2AService_GetTaskPushNotificationConfig_FullMethodName,
	a2apb.A2AService_ListTaskPushNotificationConfigs_FullMethodName, a2apb.A2AService_DeleteTaskPushNotificationConfig_FullMethodName,
	a2apb.A2AService_GetExtendedAgentCard_FullMethodName,
	a2apb.A2AService_SendStreamingMessage_FullMethodName, a2apb.A2AService_SubscribeToTask_FullMethodName,
}

// fuzzGRPCStreams is where the streaming methods start in fuzzGRPCMethods.
const fuzzGRPCStreams = 9

// FuzzGRPCMessages sends any bytes as the request message of any method of
// the gRPC binding (A2A v1.0 §10: a client's protobuf, decoded by gRPC,
// checked by checkedDecoder, converted by the SDK, handled), as alice.
// Properties: no panic (gRPC does not recover a handler's: the process
// would die) and no hang; the answer's status is a client's error or a
// result, never INTERNAL, UNKNOWN or DATA_LOSS: a message that is not
// the method's protobuf is the client's mistake (A2A v1.0 §3.3.2:
// validation errors are INVALID_ARGUMENT), not a server's failure that
// a client may report or retry, with the SDK's ErrorInfo of a parse
// error; on the streaming methods too, where gRPC itself would write
// INTERNAL (serverCodec).
func FuzzGRPCMessages(f *testing.F) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", "a2a", "2026-11-25T10:00:00Z"))
	conn := grpcConn(f, fh)

	data, _ := structpb.NewStruct(map[string]any{"a": []any{1.0, "x", nil}})
	msg := &a2apb.Message{MessageId: "m-1", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{
		{Content: &a2apb.Part_Text{Text: "What is the weather today?"}},
		{Content: &a2apb.Part_Data{Data: structpb.NewStructValue(data)}},
		{Content: &a2apb.Part_Url{Url: "https://x.example/f"}, MediaType: "text/plain"},
		{Content: &a2apb.Part_Raw{Raw: []byte("hi")}}}}
	n := int32(-1)
	for i, m := range []proto.Message{
		&a2apb.SendMessageRequest{Message: msg, Configuration: &a2apb.SendMessageConfiguration{HistoryLength: &n}},
		&a2apb.GetTaskRequest{Id: "a"},
		&a2apb.ListTasksRequest{Status: a2apb.TaskState(99)},
		&a2apb.CancelTaskRequest{Id: "a", Tenant: "t"},
		&a2apb.TaskPushNotificationConfig{TaskId: "a", Url: "https://hooks.example/x"},
		&a2apb.GetTaskPushNotificationConfigRequest{TaskId: "a", Id: "c"},
		&a2apb.ListTaskPushNotificationConfigsRequest{TaskId: "a", PageSize: 2},
		&a2apb.DeleteTaskPushNotificationConfigRequest{TaskId: "a", Id: "c"},
		&a2apb.GetExtendedAgentCardRequest{},
		&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Parts: []*a2apb.Part{{}}}},
		&a2apb.SubscribeToTaskRequest{Id: "a"},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
		f.Add(uint8(i), b[:len(b)/2])
	}
	f.Add(uint8(0), []byte{0xff})
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		m := fuzzGRPCMethods[int(method)%len(fuzzGRPCMethods)]
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key), 10*time.Second)
		defer cancel()
		var err error
		if int(method)%len(fuzzGRPCMethods) < fuzzGRPCStreams {
			var out []byte
			err = conn.Invoke(ctx, m, &body, &out, grpc.ForceCodec(rawCodec{}))
		} else {
			err = streamCall(ctx, conn, m, body)
		}
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Internal, codes.Unknown, codes.DataLoss, codes.DeadlineExceeded:
			t.Fatalf("%s with %x: %v", m, body, err)
		case codes.InvalidArgument:
			if strings.Contains(st.Message(), "unmarshal") && !parseErrorInfo(st) {
				t.Fatalf("%s with %x: %v without the ErrorInfo of a parse error", m, body, err)
			}
		}
	})
}

// parseErrorInfo reports whether st carries the A2A ErrorInfo of a parse
// error.
func parseErrorInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == a2a.ErrorReason(a2a.ErrParseError) && info.GetDomain() == a2a.ProtocolDomain {
			return true
		}
	}
	return false
}

// streamCall sends body on a server-streaming method and reads the stream
// to its end, or its first error.
func streamCall(ctx context.Context, conn *grpc.ClientConn, method string, body []byte) error {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := s.SendMsg(&body); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var out []byte
		if err := s.RecvMsg(&out); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestGRPCStreamUndecodable: a streaming method's request message that is
// not its protobuf (truncated, a string field of invalid UTF-8) is
// INVALID_ARGUMENT with the ErrorInfo of a parse error, as the unary
// method of the same request answers it (A2A v1.0 §3.3.2: a client's
// malformed message is a validation error). It was gRPC's own INTERNAL
// ("grpc: failed to unmarshal the received message"), written before the
// handler saw the error: a server's failure to clients and retry
// policies.
func TestGRPCStreamUndecodable(t *testing.T) {
	fh, conn, ctx := aliceTaskGRPC(t)
	for _, tc := range []struct{ stream, unary string }{
		{a2apb.A2AService_SendStreamingMessage_FullMethodName, a2apb.A2AService_SendMessage_FullMethodName},
		{a2apb.A2AService_SubscribeToTask_FullMethodName, a2apb.A2AService_GetTask_FullMethodName},
	} {
		for _, body := range [][]byte{{0x12}, {0x12, 0x05, 'a'}, {0x0a, 0x01, 0xff}, {0xff}} {
			var out []byte
			want := status.Convert(conn.Invoke(ctx, tc.unary, &body, &out, grpc.ForceCodec(rawCodec{})))
			if want.Code() != codes.InvalidArgument || !parseErrorInfo(want) {
				t.Fatalf("%s with %x: %v; want INVALID_ARGUMENT with a parse error's ErrorInfo", tc.unary, body, want.Err())
			}
			got := status.Convert(streamCall(ctx, conn, tc.stream, body))
			if got.Code() != want.Code() || got.Message() != want.Message() || statusShape(got) != statusShape(want) {
				t.Errorf("%s with %x: %v %q %s; want %v %q %s, as %s answers it", tc.stream, body, got.Code(), got.Message(),
					statusShape(got), want.Code(), want.Message(), statusShape(want), tc.unary)
			}
		}
	}
	if p, s := fh.Published(), fh.Served(); len(p) != 0 || len(s) != 0 {
		t.Errorf("%d requests published, %d served; want none", len(p), len(s))
	}
}

// aliceTaskGRPC is a fake host holding alice's task "a", a connection to
// the gRPC binding over it, and a context of alice's calls that ends with
// the test (or after 20 s).
func aliceTaskGRPC(t *testing.T) (fakeHost, *grpc.ClientConn, context.Context) {
	t.Helper()
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", "a2a", "2026-11-25T10:00:00Z"))
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "x-api-key", key), 20*time.Second)
	t.Cleanup(cancel)
	return fh, grpcConn(t, fh), ctx
}

// statusShape is what a client reads of st's details: each detail's type,
// and an ErrorInfo's reason, domain and metadata keys.
func statusShape(st *status.Status) string {
	var b strings.Builder
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok {
			fmt.Fprintf(&b, "%T;", d)
			continue
		}
		fmt.Fprintf(&b, "ErrorInfo %s %s %v;", info.GetReason(), info.GetDomain(), slices.Sorted(maps.Keys(info.GetMetadata())))
	}
	return b.String()
}

// TestGRPCStreamRequestCount: a streaming method's call that sends no
// request message (the client ends its sending at once), or two, is
// INVALID_ARGUMENT with the ErrorInfo of a parse error, the details an
// undecodable request gets, in gRPC's words. It was gRPC's own INTERNAL
// ("cardinality violation: ..."), written before the handler saw the
// error: a server's failure to clients and retry policies.
func TestGRPCStreamRequestCount(t *testing.T) {
	fh, conn, ctx := aliceTaskGRPC(t)
	var out []byte
	want := status.Convert(conn.Invoke(ctx, a2apb.A2AService_GetTask_FullMethodName, &[]byte{0xff}, &out, grpc.ForceCodec(rawCodec{})))
	if want.Code() != codes.InvalidArgument || !parseErrorInfo(want) {
		t.Fatalf("GetTask of an undecodable request: %v; want INVALID_ARGUMENT with a parse error's ErrorInfo", want.Err())
	}
	valid := map[string][]byte{}
	for m, req := range map[string]proto.Message{
		a2apb.A2AService_SendStreamingMessage_FullMethodName: &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m-1",
			Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}},
		a2apb.A2AService_SubscribeToTask_FullMethodName: &a2apb.SubscribeToTaskRequest{Id: "a"},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		valid[m] = b
	}
	for _, m := range slices.Sorted(maps.Keys(valid)) {
		for _, tc := range []struct {
			name string
			sent [][]byte
			msg  string
		}{
			{"no request message", nil, noRequest},
			{"two request messages", [][]byte{valid[m], valid[m]}, severalRequests},
		} {
			// Client streaming, so that the client may send two.
			s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, m, grpc.ForceCodec(rawCodec{}))
			for _, b := range tc.sent {
				if err == nil {
					err = s.SendMsg(&b)
				}
			}
			if err == nil {
				err = s.CloseSend()
			}
			for err == nil {
				var out []byte
				err = s.RecvMsg(&out)
			}
			if errors.Is(err, io.EOF) {
				t.Errorf("%s with %s: answered; want INVALID_ARGUMENT", m, tc.name)
				continue
			}
			got := status.Convert(err)
			if got.Code() != codes.InvalidArgument || got.Message() != tc.msg || statusShape(got) != statusShape(want) {
				t.Errorf("%s with %s: %v %q %s; want %v %q %s, as an undecodable request is answered", m, tc.name,
					got.Code(), got.Message(), statusShape(got), want.Code(), tc.msg, statusShape(want))
			}
		}
	}
	if p, s := fh.Published(), fh.Served(); len(p) != 0 || len(s) != 0 {
		t.Errorf("%d requests published, %d served; want none", len(p), len(s))
	}
}

// TestGRPCAnsweredByGRPC pins what grpc-go answers itself, before any of
// the binding's code runs, so that the binding cannot give it the A2A
// error's details (docs/protocols.md says so): a unary call without a
// request message (UNKNOWN "EOF"), and a request over the server's
// receive bound (RESOURCE_EXHAUSTED, on every method: grpc-go refuses it
// by the length in the message's header, before reading it). Should
// grpc-go ever hand these to the service, this fails: answer them as an
// undecodable request is then, and update the documentation.
func TestGRPCAnsweredByGRPC(t *testing.T) {
	fh, conn, ctx := aliceTaskGRPC(t)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{}, a2apb.A2AService_GetTask_FullMethodName, grpc.ForceCodec(rawCodec{}))
	if err == nil {
		err = s.CloseSend()
	}
	if err == nil {
		var out []byte
		err = s.RecvMsg(&out)
	}
	if st := status.Convert(err); st.Code() != codes.Unknown || st.Message() != "EOF" || len(st.Details()) != 0 {
		t.Errorf("GetTask without a request message: %v %q %s; want grpc-go's UNKNOWN \"EOF\"", st.Code(), st.Message(), statusShape(st))
	}
	big := make([]byte, 4<<20+1) // over grpc-go's default bound (A2AGRPC's is E2A_MAX_BODY_BYTES)
	for _, m := range []string{a2apb.A2AService_GetTask_FullMethodName, a2apb.A2AService_SubscribeToTask_FullMethodName} {
		var err error
		if m == a2apb.A2AService_GetTask_FullMethodName {
			var out []byte
			err = conn.Invoke(ctx, m, &big, &out, grpc.ForceCodec(rawCodec{}))
		} else {
			err = streamCall(ctx, conn, m, big)
		}
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") || len(st.Details()) != 0 {
			t.Errorf("%s of %d bytes: %v %q %s; want grpc-go's RESOURCE_EXHAUSTED without details", m, len(big), st.Code(), st.Message(), statusShape(st))
		}
	}
	if p, s := fh.Published(), fh.Served(); len(p) != 0 || len(s) != 0 {
		t.Errorf("%d requests published, %d served; want none", len(p), len(s))
	}
}

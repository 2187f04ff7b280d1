package a2av1

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc/metadata"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// benchRequests are the frames of the conformance scenarios that finish
// from their first frame: one request each, as a benchmark iteration
// answers them all.
func benchRequests() [][]*e2a.Response {
	var out [][]*e2a.Response
	for _, sc := range conformance.Scenarios() {
		if sc.Final && sc.From == 0 && len(sc.Frames) > 0 {
			out = append(out, sc.Frames)
		}
	}
	return out
}

// BenchmarkV1Request: what answering one request costs in A2A v1.0, per
// request (the mean over the conformance scenarios' requests): "stream",
// SendStreamingMessage's JSON-RPC SSE (NewStream) over decoded frames;
// "result", SendMessage's result (the frames aggregated, filtered, as the
// v1.0 value: v1SendResult); "task", GetTask's task rebuilt from the
// request (v1BuildTask).
func BenchmarkV1Request(b *testing.B) {
	reqs := benchRequests()
	p := a2amap.Params{TaskID: "task-1", ContextID: "ctx-1", Submitted: conformance.Time(), Interaction: true}
	frames := make([][]*render.Frame, len(reqs))
	for i, fs := range reqs {
		for j, f := range fs {
			raw, err := json.Marshal(f)
			if err != nil {
				b.Fatal(err)
			}
			frames[i] = append(frames[i], &render.Frame{Response: f, Raw: raw, StreamSeq: uint64(j + 1)})
		}
	}
	rec := httptest.NewRecorder()
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fs := frames[i%len(frames)]
			rec.Body.Reset()
			rend := NewStream(render.NewOutput(rec, time.Second), fs[0].Response.RequestID, p, json.RawMessage(`1`), 0)
			if err := rend.Start(); err != nil {
				b.Fatal(err)
			}
			for _, f := range fs {
				if err := rend.Frame(f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("result", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fs := reqs[i%len(reqs)]
			if _, err := v1SendResult(fs[0].RequestID, p, fs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("task", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fs := reqs[i%len(reqs)]
			env := &e2a.Envelope{RequestID: fs[0].RequestID, Params: map[string]any{"text": "question"}}
			if _, err := v1BuildTask("task-1", "ctx-1", []a2amap.Request{{Envelope: env, Frames: fs}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGRPCCall: what a well-formed call of the gRPC binding costs,
// client and server, over an in-memory connection (grpcConn): "GetTask",
// a unary call; "SendStreamingMessage", a stream of one answer frame
// (servingHost), read to its end.
func BenchmarkGRPCCall(b *testing.B) {
	fh := servingHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"))
	client := a2apb.NewA2AServiceClient(grpcConn(b, fh))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
	b.Run("GetTask", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := client.GetTask(ctx, &a2apb.GetTaskRequest{Id: "a"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	req := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m-1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "What is the weather today?"}}}}}
	b.Run("SendStreamingMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := client.SendStreamingMessage(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := s.Recv(); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

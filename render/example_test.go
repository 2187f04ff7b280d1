package render_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// storedFrame returns frame seq of request req-1 as it is stored in
// E2A_RESPONSES: an in-progress text chunk, or the final e2a.complete.
func storedFrame(seq int64, final bool, text string) []byte {
	r := e2a.Response{
		ProtocolVersion: e2a.ProtocolVersion,
		ResponseID:      fmt.Sprintf("r%d", seq),
		RequestID:       "req-1",
		SessionID:       "sess-1",
		Sequence:        seq,
		Status:          e2a.StatusInProgress,
		ResponseKind:    e2a.KindChunk,
		Timestamp:       "2026-03-29T12:00:00+00:00",
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceE2A},
		Body:            e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}),
	}
	if final {
		r.IsFinal, r.Status, r.ResponseKind = true, e2a.StatusSucceeded, e2a.KindComplete
		r.Body = e2a.MarshalBody(e2a.CompleteBody{Result: map[string]any{"content": text}})
	}
	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		panic(err)
	}
	return b
}

// A reader opened for a PassThrough renderer delivers each frame with only
// its head read: HeadFrame gives such a frame. Its sequence, finality and
// kind need no decode; a plain text chunk is read by the text fast path
// (ReadTextChunk) from the frame's bytes; anything else is decoded on
// demand (Frame.Decoded). Bytes that are no frame are ErrInvalidFrame.
func ExampleHeadFrame() {
	f, err := render.HeadFrame(storedFrame(0, false, "Hello"), 7)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Sequence(), f.Kind(), f.IsFinal(), f.StreamSeq, f.Response == nil)
	if c, ok := render.ReadTextChunk(f); ok {
		fmt.Printf("text chunk %q of %s in %s\n", c.Text, c.RequestID, c.SessionID)
	}
	fmt.Println("SSE id:", render.SeqID(f))

	last, _ := render.HeadFrame(storedFrame(1, true, "Hello"), 8)
	_, ok := render.ReadTextChunk(last)
	fmt.Println(last.Sequence(), last.Kind(), last.IsFinal(), "text chunk:", ok)
	resp, err := last.Decoded()
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := resp.Complete()
	fmt.Println(resp.Status, c.Result, last.Response != nil)

	_, err = render.HeadFrame([]byte(`{"sequence":2,`), 9)
	fmt.Println(errors.Is(err, render.ErrInvalidFrame))
	// Output:
	// 0 e2a.chunk false 7 true
	// text chunk "Hello" of req-1 in sess-1
	// SSE id: 0
	// 1 e2a.complete true text chunk: false
	// succeeded map[content:Hello] true
	// true
}

// The SSE helpers write on an Output, the response a renderer writes to:
// SSEHead the head (and the client's retry interval), SSEEvent an event
// whose data is one line of JSON (a frame stored with line breaks is
// compacted), FrameEvents the events of one frame, the last carrying the
// frame's sequence as id (what Last-Event-ID resumes after), SSEComment a
// heartbeat, and SSEEndEvent the error that ends a stream.
func ExampleSSEEvent() {
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 10*time.Second)

	render.SSEHead(o, 3*time.Second)
	_ = render.SSEEvent(o, "", "greeting", []byte("{\n  \"text\": \"Hi\"\n}"))
	f, _ := render.HeadFrame(storedFrame(4, false, "Hello"), 1)
	_ = render.FrameEvents(f, []string{"first", "second"}, func(id, ev string) error {
		return render.SSEEventJSON(o, id, "part", map[string]string{"name": ev})
	})
	_ = render.SSEComment(o, "keep-alive")
	_ = render.SSEEndEvent(o, "error", map[string]string{"code": "timeout"})
	if err := o.Flush(); err != nil {
		fmt.Println(err)
	}

	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"), o.Started())
	fmt.Print(rec.Body.String())
	// Output:
	// 200 text/event-stream no-cache true
	// retry: 3000
	// event: greeting
	// data: {"text":"Hi"}
	//
	// event: part
	// data: {"name":"first"}
	//
	// id: 4
	// event: part
	// data: {"name":"second"}
	//
	// : keep-alive
	//
	// event: error
	// data: {"code":"timeout"}
}

// lines is an output format of one NDJSON record per frame: {"text":…}
// for each text chunk, {"kind":…} for any other frame before the last,
// and {"done":true,"status":…} for the final frame.
type lines struct{ o *render.Output }

type line struct {
	Text   string `json:"text,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Done   bool   `json:"done,omitempty"`
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (l *lines) Start() error     { render.NDJSONHead(l.o); return nil }
func (l *lines) Heartbeat() error { return nil }

func (l *lines) Frame(f *render.Frame) error {
	if c, ok := render.ReadTextChunk(f); ok {
		return render.WriteLineJSON(l.o, line{Text: c.Text})
	}
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	if resp.IsFinal {
		return render.WriteLineJSON(l.o, line{Done: true, Status: resp.Status})
	}
	return render.WriteLineJSON(l.o, line{Kind: resp.ResponseKind})
}

func (l *lines) End(err error) error {
	switch {
	case err == nil:
		return nil
	case !l.o.Started(): // before Start: the whole answer is the error
		status, _ := egress.Classify(err)
		return l.o.WriteJSON(status, line{Error: egress.ClientMessage(err)})
	default: // in-band
		return render.WriteLineJSON(l.o, line{Error: egress.ClientMessage(err)})
	}
}

// PassThrough: the driver need not decode the frames, the renderer does
// where it needs more than the text fast path.
func (l *lines) PassThrough() bool { return true }

// A Renderer is one output format of a request's frames; a driver, here
// egress's (Service.ServeFrom, as a protocol's front door answers with
// Service.Serve), calls Start, Frame for each frame in order, Heartbeat
// while idle and End once. The renderer lines writes one NDJSON record per
// frame: the text chunks of the agent "echo" as {"text":…}, its final
// frame as {"done":true,…}; a request that does not exist is answered by
// End before Start, in the format's own error shape.
func ExampleRenderer() {
	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The agent pool "echo" answers each word of params.words as a text
	// chunk, then completes (coalescing off: one frame per chunk).
	echo := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		words, _ := env.Params["words"].([]any)
		for _, word := range words {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprint(word)); err != nil {
				return err
			}
		}
		return w.Complete(map[string]any{"words": len(words)})
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "echo", echo, agent.WithCoalesce(0, 0)) }()
	env := &e2a.Envelope{RequestID: "req-lines", IsStream: true, Params: map[string]any{"words": []string{"Hello", " world"}}}
	if _, err := ingress.NewPublisher(mem.JetStream, 10*time.Second).Publish(ctx, "echo", env); err != nil {
		panic(err)
	}

	eg, err := egress.New(mem.Conn, egress.WithWaitLimits(10*time.Second, 10*time.Second))
	if err != nil {
		panic(err)
	}
	newLines := func(o *render.Output) render.Renderer { return &lines{o: o} }

	rec := httptest.NewRecorder()
	eg.ServeFrom(ctx, rec, "req-lines", "lines", 0, newLines)
	fmt.Print(rec.Code, " ", rec.Header().Get("Content-Type"), "\n", rec.Body.String())

	// Resumed after the first frame: the frames from sequence 1.
	rec = httptest.NewRecorder()
	eg.ServeFrom(ctx, rec, "req-lines", "lines", 1, newLines)
	fmt.Print(rec.Body.String())

	// A request that does not exist: End before Start.
	rec = httptest.NewRecorder()
	eg.ServeExisting(rec, httptest.NewRequest("GET", "/lines/req-none", nil), "req-none", "lines", newLines)
	fmt.Print(rec.Code, " ", rec.Body.String())

	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// 200 application/x-ndjson
	// {"text":"Hello"}
	// {"text":" world"}
	// {"done":true,"status":"succeeded"}
	// {"text":" world"}
	// {"done":true,"status":"succeeded"}
	// 404 {"error":"request not found: \"req-none\""}
	// Run: <nil>
}

package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/render"
)

// Run renders one scenario of the suite step by step, as a driver would,
// and returns what the renderer wrote: the text of its golden file (the
// status, the stream headers, then "### <step>" and what the step wrote)
// and the whole response, whose syntax SSEData checks for an SSE format.
// Here egress's E2A SSE renderer renders the scenario "resume_from_3": a
// stream resumed at sequence 3, to its final frame.
func ExampleRun() {
	var names []string
	var resume conformance.Scenario
	for _, sc := range conformance.Scenarios() {
		names = append(names, sc.Name)
		if sc.Name == "resume_from_3" {
			resume = sc
		}
	}
	fmt.Println(strings.Join(names, " "))

	run, err := conformance.Run(resume, func(o *render.Output) render.Renderer { return egress.NewE2ASSE(o, 2*time.Second, "") })
	if err != nil {
		fmt.Println(err)
		return
	}
	// The golden text's own lines: status, headers and steps.
	for _, l := range strings.Split(string(run.Golden), "\n") {
		if strings.HasPrefix(l, "#") {
			fmt.Println(l)
		}
	}
	events, err := conformance.SSEData(run.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, data := range events {
		f, err := e2a.ResponseFromJSON(data)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("event:", f.Sequence, f.ResponseKind, f.IsFinal)
	}
	// Output:
	// spec_12_8 trpc_tool_call resume_from_3 reasoning_then_text code_execution single_message error cancel input_required auth_required acp_native a2a_native not_found timeout
	// # status 200
	// # Content-Type: text/event-stream
	// # Cache-Control: no-cache
	// # X-Accel-Buffering: no
	// ### start
	// ### frame 3
	// ### frame 4
	// ### frame 5
	// ### end
	// event: 3 e2a.chunk false
	// event: 4 e2a.chunk false
	// event: 5 e2a.complete true
}

// RenderFrames is what the text fast paths' differential tests compare:
// a renderer's output for frames it is given decoded, and for the same
// frames as a reader without decode gives them (lazy: only their head
// read, render.HeadFrame), which a PassThrough renderer's fast path reads
// from the bytes. Here A2A's message/stream renderer over TextFrames (hostile
// texts, runs split by reasoning and tool chunks, odd metadata) writes the
// same bytes both ways, a well-formed SSE stream.
func ExampleRenderFrames() {
	newStream := func(o *render.Output) render.Renderer {
		return a2a.NewStream(o, "req-fast", a2amap.Params{JSONRPCID: json.RawMessage(`1`), TaskID: "task-1",
			ContextID: "ctx-1", Submitted: conformance.Time()}, 0)
	}
	frames := conformance.TextFrames()
	decoded, err := conformance.RenderFrames(newStream, frames, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	lazy, err := conformance.RenderFrames(newStream, frames, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("frames:", len(frames))
	fmt.Println("same bytes:", bytes.Equal(decoded, lazy))
	events, err := conformance.SSEData(lazy)
	fmt.Println("well-formed:", err == nil, len(events) > 0)
	fmt.Println("hostile text escaped:", bytes.Contains(lazy, []byte(`\u003cb\u003e`)))
	// Output:
	// frames: 15
	// same bytes: true
	// well-formed: true true
	// hostile text escaped: true
}

// Host is a fake pipeline for the tests of a protocol package's front
// door, without ingress or NATS: it admits the request, records what is
// published (Published, Pools) and served (Served), and answers from
// the request's Frames with the renderer the package chose. Here it is
// the host of the E2A front door (package protocols/e2a): a streamed
// request is answered from its frames, a request past the caller's stream
// slots is refused, in E2A's error shape.
func ExampleHost() {
	h := &conformance.Host{Frames: map[string][]*e2a.Response{"req-1": {
		conformance.Chunk("req-1", 0, e2a.DeltaText, "Hello", ""),
		conformance.Frame("req-1", 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "Hello"}}, nil),
	}}}
	door := e2aproto.NewHandler(h)

	post := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/requests?agent=chat", strings.NewReader(body))
		r.Header.Set("Accept", "application/x-ndjson")
		rec := httptest.NewRecorder()
		door.ServeHTTP(rec, r)
		return rec
	}

	rec := post(`{"request_id":"req-1","method":"chat.send","params":{"text":"Hi"}}`)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	lines, err := conformance.NDJSONLines(rec.Body.Bytes())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range lines {
		f, _ := e2a.ResponseFromJSON(l)
		fmt.Println(f.Sequence, f.ResponseKind, f.Status)
	}
	env := h.Published()[0]
	fmt.Println("published:", env.RequestID, env.Method, env.IsStream, env.ParamString("text"), h.Pools())
	fmt.Println("served:", h.Served(), "slots held:", h.Slots())

	h.NoSlot = true
	rec = post(`{"request_id":"req-2","params":{"text":"Hi"}}`)
	fmt.Print(rec.Code, " Retry-After=", rec.Header().Get("Retry-After"), " ", rec.Body)
	fmt.Println("published:", len(h.Published()))
	// Output:
	// 200 application/x-ndjson
	// 0 e2a.chunk in_progress
	// 1 e2a.complete succeeded
	// published: req-1 chat.send true Hi [chat]
	// served: [req-1 e2a_ndjson] slots held: 0
	// 429 Retry-After=1 {"error":{"code":"too_many_streams","message":"too many concurrent streams for this principal","retryable":true}}
	// published: 1
}

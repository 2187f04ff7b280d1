package a2amap_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// exampleFrame returns frame seq of request req-1 (task task-1, context
// ctx-1), written at 12:00:<seq> on 29 March 2026.
func exampleFrame(seq int64, kind, status string, final bool, body any) *e2a.Response {
	return &e2a.Response{
		ProtocolVersion: e2a.ProtocolVersion,
		ResponseID:      "rsp-" + strconv.FormatInt(seq, 10),
		RequestID:       "req-1",
		Sequence:        seq,
		IsFinal:         final,
		Status:          status,
		ResponseKind:    kind,
		Timestamp:       e2a.FormatTime(time.Date(2026, 3, 29, 12, 0, int(seq), 0, time.UTC)),
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceE2A},
		Body:            e2a.MarshalBody(body),
		TaskID:          "task-1",
		ContextID:       "ctx-1",
	}
}

// exampleText is exampleFrame of an in-progress text chunk.
func exampleText(seq int64, text string) *e2a.Response {
	return exampleFrame(seq, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text})
}

// A Mapper turns the frames of one request, in order, into the A2A v1.0
// events of its stream: text chunks into artifact-updates of one
// artifact (the first creates it, the next ones append), the final frame
// into the terminal status-update. A stream opens with the submitted
// status (StatusUpdate); the ids are the call's (Params), else the request
// id. Each event is printed as the v1.0
// StreamResponse a client reads (proto JSON names).
func ExampleMapper() {
	m := a2amap.NewStreamMapper("req-1", a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"}, 0)
	submitted := time.Date(2026, 3, 29, 11, 59, 59, 0, time.UTC)
	show := func(ev a2a.Event) {
		b, err := json.Marshal(a2a.StreamResponse{Event: ev})
		if err != nil {
			panic(err)
		}
		fmt.Println(string(b))
	}
	show(m.StatusUpdate(a2a.TaskStateSubmitted, &submitted, nil))

	frames := []*e2a.Response{
		exampleText(0, "Hello"),
		exampleText(1, " world"),
		exampleFrame(2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "Hello world"}}),
	}
	for _, f := range frames {
		evs, err := m.Events(f)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, ev := range evs {
			show(ev)
		}
	}
	// Output:
	// {"statusUpdate":{"contextId":"ctx-1","status":{"state":"TASK_STATE_SUBMITTED","timestamp":"2026-03-29T11:59:59Z"},"taskId":"task-1"}}
	// {"artifactUpdate":{"artifact":{"artifactId":"rsp-0","parts":[{"text":"Hello"}]},"contextId":"ctx-1","taskId":"task-1","metadata":{"llm_response_id":"rsp-0","object_type":"chat.completion.chunk","tag":""}}}
	// {"artifactUpdate":{"append":true,"artifact":{"artifactId":"rsp-0","parts":[{"text":" world"}]},"contextId":"ctx-1","taskId":"task-1","metadata":{"llm_response_id":"rsp-0","object_type":"chat.completion.chunk","tag":""}}}
	// {"statusUpdate":{"contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-03-29T12:00:02Z"},"taskId":"task-1"}}
}

// An Aggregator assembles the frames of a blocking call (A2A v1.0
// SendMessage, v0.3 message/send) into its result: here the agent's text
// as one Message, since the request completed with one content message
// and no artifact. V03Result is the same result as an A2A v0.3 client
// gets it. A request that did not complete so is answered with its Task.
func ExampleAggregator() {
	agg := a2amap.NewAggregator("req-1", a2amap.Params{})
	for _, f := range []*e2a.Response{
		exampleText(0, "Hello"),
		exampleText(1, " world"),
		exampleFrame(2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}),
	} {
		if err := agg.Add(f); err != nil {
			fmt.Println(err)
			return
		}
	}
	res := agg.Result(nil)
	b, _ := json.Marshal(a2a.StreamResponse{Event: res}) // as SendMessage's result
	fmt.Println("v1.0:", string(b))
	v03, err := a2amap.V03Result(res)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ = json.Marshal(v03)
	fmt.Println("v0.3:", string(b))

	// A request that failed is answered with its Task, in state failed,
	// the error's message as the status message.
	agg = a2amap.NewAggregator("req-1", a2amap.Params{})
	agg.Add(exampleText(0, "Hel"))
	agg.Add(exampleFrame(1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeHandlerError, Message: "tool crashed"}))
	b, _ = json.Marshal(a2a.StreamResponse{Event: agg.Result(nil)})
	fmt.Println("failed:", string(b))
	// Output:
	// v1.0: {"message":{"messageId":"rsp-0","contextId":"ctx-1","metadata":{"llm_response_id":"rsp-0","object_type":"chat.completion","tag":""},"parts":[{"text":"Hello world"}],"role":"ROLE_AGENT"}}
	// v0.3: {"kind":"message","messageId":"rsp-0","contextId":"ctx-1","metadata":{"llm_response_id":"rsp-0","object_type":"chat.completion","tag":""},"parts":[{"kind":"text","text":"Hello world"}],"role":"agent"}
	// failed: {"task":{"id":"task-1","contextId":"ctx-1","history":[{"messageId":"rsp-0","contextId":"ctx-1","metadata":{"llm_response_id":"rsp-0","object_type":"chat.completion","tag":""},"parts":[{"text":"Hel"}],"role":"ROLE_AGENT","taskId":"task-1"}],"status":{"message":{"messageId":"rsp-1","contextId":"ctx-1","metadata":{"error":{"code":"handler_error","message":"tool crashed","retryable":false}},"parts":[{"text":"tool crashed"}],"role":"ROLE_AGENT","taskId":"task-1"},"state":"TASK_STATE_FAILED","timestamp":"2026-03-29T12:00:01Z"}}}
}

// FinalOutcome reads how a final frame ends a request, as every protocol's
// renderer reads it: the A2A task state, and for a failure the pipeline's
// error code, message and whether a retry may succeed.
func ExampleFinalOutcome() {
	done := exampleFrame(3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "42"})
	failed := exampleFrame(3, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{
		Code: e2a.ErrCodeDeadlineExceeded, Message: "the agent did not answer in time", Retryable: true,
	})
	asked := exampleFrame(3, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.InterruptBody(e2a.StateInputRequired, "Which city?"))

	for _, f := range []*e2a.Response{done, failed, asked} {
		o := a2amap.FinalOutcome(f)
		fmt.Printf("%s: state=%s result=%v code=%q message=%q retryable=%t\n", f.ResponseKind, o.State, o.Result, o.Code, o.Message, o.Retryable)
	}
	// Output:
	// e2a.complete: state=TASK_STATE_COMPLETED result=42 code="" message="" retryable=false
	// e2a.error: state=TASK_STATE_FAILED result=<nil> code="deadline_exceeded" message="the agent did not answer in time" retryable=true
	// a2a.stream_event: state=TASK_STATE_INPUT_REQUIRED result=<nil> code="" message="Which city?" retryable=false
}

package a2amap_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// A Mapper turns the frames of one request, in order, into the A2A v1.0
// events of its stream: text chunks into artifact-updates of one
// artifact (the first creates it, the next ones append), the final frame
// into the terminal status-update. A stream opens with the submitted
// status (StatusUpdate); the ids are the call's (Params), else the request
// id. Each event is printed as the v1.0
// StreamResponse a client reads (proto JSON names).
func ExampleMapper() {
	m := a2amap.NewStreamMapper("req-1", a2amap.Params{TaskID: "task-002", ContextID: "ctx-001"}, 0)
	submitted := conformance.Time().Add(-time.Second)
	show := func(ev a2a.Event) {
		b, err := json.Marshal(a2a.StreamResponse{Event: ev})
		if err != nil {
			panic(err)
		}
		fmt.Println(string(b))
	}
	show(m.StatusUpdate(a2a.TaskStateSubmitted, &submitted, nil))

	frames := []*e2a.Response{
		conformance.Chunk("req-1", 0, e2a.DeltaText, "Hello", ""),
		conformance.Chunk("req-1", 1, e2a.DeltaText, " world", ""),
		conformance.Frame("req-1", 2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "Hello world"}}, nil),
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
	// {"statusUpdate":{"contextId":"ctx-001","status":{"state":"TASK_STATE_SUBMITTED","timestamp":"2025-01-23T10:29:59Z"},"taskId":"task-002"}}
	// {"artifactUpdate":{"artifact":{"artifactId":"rsp-req-1-0","parts":[{"text":"Hello"}]},"contextId":"ctx-001","taskId":"task-002","metadata":{"llm_response_id":"rsp-req-1-0","object_type":"chat.completion.chunk","tag":""}}}
	// {"artifactUpdate":{"append":true,"artifact":{"artifactId":"rsp-req-1-0","parts":[{"text":" world"}]},"contextId":"ctx-001","taskId":"task-002","metadata":{"llm_response_id":"rsp-req-1-0","object_type":"chat.completion.chunk","tag":""}}}
	// {"statusUpdate":{"contextId":"ctx-001","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2025-01-23T10:30:02Z"},"taskId":"task-002"}}
}

// An Aggregator assembles the frames of a blocking call (A2A v1.0
// SendMessage, v0.3 message/send) into its result: here the agent's text
// as one Message, since the request completed with one content message
// and no artifact. V03Result is the same result as an A2A v0.3 client
// gets it. A request that did not complete so is answered with its Task.
func ExampleAggregator() {
	agg := a2amap.NewAggregator("req-1", a2amap.Params{})
	for _, f := range []*e2a.Response{
		conformance.Chunk("req-1", 0, e2a.DeltaText, "Hello", ""),
		conformance.Chunk("req-1", 1, e2a.DeltaText, " world", ""),
		conformance.Frame("req-1", 2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}, nil),
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
	agg.Add(conformance.Chunk("req-1", 0, e2a.DeltaText, "Hel", ""))
	agg.Add(conformance.Frame("req-1", 1, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{Code: e2a.ErrCodeHandlerError, Message: "tool crashed"}, nil))
	b, _ = json.Marshal(a2a.StreamResponse{Event: agg.Result(nil)})
	fmt.Println("failed:", string(b))
	// Output:
	// v1.0: {"message":{"messageId":"rsp-req-1-0","contextId":"ctx-001","metadata":{"llm_response_id":"rsp-req-1-0","object_type":"chat.completion","tag":""},"parts":[{"text":"Hello world"}],"role":"ROLE_AGENT"}}
	// v0.3: {"kind":"message","messageId":"rsp-req-1-0","contextId":"ctx-001","metadata":{"llm_response_id":"rsp-req-1-0","object_type":"chat.completion","tag":""},"parts":[{"kind":"text","text":"Hello world"}],"role":"agent"}
	// failed: {"task":{"id":"task-002","contextId":"ctx-001","history":[{"messageId":"rsp-req-1-0","contextId":"ctx-001","metadata":{"llm_response_id":"rsp-req-1-0","object_type":"chat.completion","tag":""},"parts":[{"text":"Hel"}],"role":"ROLE_AGENT","taskId":"task-002"}],"status":{"message":{"messageId":"rsp-req-1-1","contextId":"ctx-001","metadata":{"error":{"code":"handler_error","message":"tool crashed","retryable":false}},"parts":[{"text":"tool crashed"}],"role":"ROLE_AGENT","taskId":"task-002"},"state":"TASK_STATE_FAILED","timestamp":"2025-01-23T10:30:01Z"}}}
}

// FinalOutcome reads how a final frame ends a request, as every protocol's
// renderer reads it: the A2A task state, and for a failure the pipeline's
// error code, message and whether a retry may succeed.
func ExampleFinalOutcome() {
	done := conformance.Frame("req-1", 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "42"}, nil)
	failed := conformance.Frame("req-1", 3, e2a.KindError, e2a.StatusFailed, true, e2a.ErrorBody{
		Code: e2a.ErrCodeDeadlineExceeded, Message: "the agent did not answer in time", Retryable: true,
	}, nil)
	asked := conformance.Frame("req-1", 3, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.InterruptBody(e2a.StateInputRequired, "Which city?"), nil)

	for _, f := range []*e2a.Response{done, failed, asked} {
		o := a2amap.FinalOutcome(f)
		fmt.Printf("%s: state=%s result=%v code=%q message=%q retryable=%t\n", f.ResponseKind, o.State, o.Result, o.Code, o.Message, o.Retryable)
	}
	// Output:
	// e2a.complete: state=TASK_STATE_COMPLETED result=42 code="" message="" retryable=false
	// e2a.error: state=TASK_STATE_FAILED result=<nil> code="deadline_exceeded" message="the agent did not answer in time" retryable=true
	// a2a.stream_event: state=TASK_STATE_INPUT_REQUIRED result=<nil> code="" message="Which city?" retryable=false
}

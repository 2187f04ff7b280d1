package a2av1

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"iter"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// streamCase is one of the package's renderer cases.
type streamCase struct {
	name string
	p    a2amap.Params
	rest bool // the HTTP+JSON binding's stream
}

// streamCases: the JSON-RPC stream for a client that declared the trpc
// interaction extension, for a basic one (_basic: no thought parts, no
// function_call/function_response DataParts), for a text/plain one
// (_text_only: no DataParts), and the HTTP+JSON binding's (_rest).
var streamCases = []streamCase{
	{StreamFormat, a2amap.Params{Interaction: true}, false},
	{StreamFormat + "_basic", a2amap.Params{}, false},
	{StreamFormat + "_text_only", a2amap.Params{Interaction: true, AcceptedOutputModes: []string{"text/plain"}}, false},
	{StreamFormat + "_rest", a2amap.Params{Interaction: true}, true},
}

// checkParts: what the case's client must not get is not in body.
func (c streamCase) checkParts(t *testing.T, body []byte) {
	t.Helper()
	var bad []string
	if !c.p.Interaction {
		bad = append(bad, `"thought":true`, `"type":"function_call"`, `"type":"function_response"`)
	}
	if len(c.p.AcceptedOutputModes) > 0 {
		bad = append(bad, `{"data":`)
	}
	for _, b := range bad {
		if bytes.Contains(body, []byte(b)) {
			t.Errorf("%s for this client:\n%s", b, body)
		}
	}
}

// newStream is the case's renderer of requestID's frames from from, the
// JSON-RPC id "req-002".
func (c streamCase) newStream(o *render.Output, requestID string, from int64) render.Renderer {
	if c.rest {
		return NewRESTStream(o, requestID, streamParams(c.p), from)
	}
	return NewStream(o, requestID, streamParams(c.p), json.RawMessage(`"req-002"`), from)
}

// streamParams are the call's parameters the cases render with.
func streamParams(p a2amap.Params) a2amap.Params {
	p.TaskID, p.ContextID, p.Submitted = "task-002", "ctx-001", conformance.Time()
	p.Task = &a2a.Task{ID: "task-002", ContextID: "ctx-001", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History: []*a2a.Message{{ID: "m-1", TaskID: "task-002", ContextID: "ctx-001", Role: a2a.MessageRoleUser,
			Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}}}
	return p
}

// TestRendererConformance runs the stream through the conformance (package protocols/conformance)
// scenarios and compares its output step by step with
// testdata/<case>/<scenario>.golden (go test -run Conformance -update
// rewrites them); every data: is a JSON-RPC response with the call's id
// whose result is a v1.0 StreamResponse, a finished stream ends with the
// task's terminal state.
func TestRendererConformance(t *testing.T) {
	old := now
	now = conformance.Time
	defer func() { now = old }()
	var cases []conformance.Case
	for _, c := range streamCases {
		cases = append(cases, conformance.Case{Name: c.name, SSE: true, AlwaysSSE: true,
			New: func(o *render.Output, sc conformance.Scenario) render.Renderer {
				return c.newStream(o, sc.RequestID(), sc.From)
			},
			Check: c.check})
	}
	conformance.TestRenderers(t, *update, cases...)
}

// check: every data: is a JSON-RPC response with the call's id whose result is a
// StreamResponse (or, over HTTP+JSON, the StreamResponse or the binding's
// error), its parts are those the client accepts, and a finished stream
// ends with the task's terminal state.
func (c streamCase) check(t *testing.T, sc conformance.Scenario, run *conformance.Result) {
	data, err := conformance.SSEData(run.Body)
	if err != nil {
		t.Fatal(err)
	}
	c.checkParts(t, run.Body)
	var last a2a.Event
	for _, d := range data {
		if c.rest {
			// A StreamResponse, or the binding's error.
			var resp struct {
				Error *struct {
					Code   int    `json:"code"`
					Status string `json:"status"`
				} `json:"error"`
			}
			if bytes.HasPrefix(d, []byte(`{"error":`)) {
				if json.Unmarshal(d, &resp) != nil || resp.Error == nil || resp.Error.Status == "" {
					t.Fatalf("not the binding's error: %s", d)
				}
				continue
			}
			var ev a2a.StreamResponse
			if err := json.Unmarshal(d, &ev); err != nil {
				t.Fatalf("not a StreamResponse: %s (%v)", d, err)
			}
			last = ev.Event
			continue
		}
		var resp struct {
			JSONRPC string              `json:"jsonrpc"`
			ID      string              `json:"id"`
			Result  *a2a.StreamResponse `json:"result"`
			Error   *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(d, &resp); err != nil || resp.JSONRPC != "2.0" || resp.ID != "req-002" ||
			(resp.Result == nil) == (resp.Error == nil) {
			t.Fatalf("not a JSON-RPC response with a StreamResponse or an error: %s (%v)", d, err)
		}
		if resp.Result != nil {
			last = resp.Result.Event
		}
	}
	if sc.Final && !terminal(last) {
		t.Errorf("a finished stream ends with %#v", last)
	}
}

// terminal reports whether ev ends a v1.0 stream: a task or a status in a
// terminal or interrupted state, or a message.
func terminal(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.Task:
		return e.Status.State.Terminal() || e.Status.State == a2a.TaskStateInputRequired || e.Status.State == a2a.TaskStateAuthRequired
	case *a2a.TaskStatusUpdateEvent:
		return e.Status.State.Terminal() || e.Status.State == a2a.TaskStateInputRequired || e.Status.State == a2a.TaskStateAuthRequired
	case *a2a.Message:
		return true
	}
	return false
}

// scenarioAnswers yields a scenario's events for the handler's
// SendStreamingMessage as protocols/a2a's Answers.A2AEvents does: the Task,
// submitted, each frame's events, the error the scenario ends with.
type scenarioAnswers struct {
	Answers
	sc conformance.Scenario
}

func (a scenarioAnswers) A2AEvents(_ context.Context, requestID string, p a2amap.Params, _ int64, _ ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		m := a2amap.NewStreamMapper(requestID, p, 0)
		ts := p.Submitted.UTC()
		if !yield(m.OpeningTask(p, &ts), nil) {
			return
		}
		for _, st := range a.sc.Steps {
			switch st.Kind {
			case conformance.StepFrame:
				evs, err := m.Events(a.sc.Frames[st.Frame])
				if err != nil {
					yield(nil, err)
					return
				}
				for _, ev := range evs {
					if !yield(ev, nil) {
						return
					}
				}
			case conformance.StepEnd:
				if st.Err != nil {
					yield(nil, st.Err)
				}
				return
			}
		}
	}
}

// sdkHost is a fakeHost answering from the scenario sc.
func sdkHost(sc conformance.Scenario) fakeHost {
	fh := newFakeHost()
	fh.answers = scenarioAnswers{sc: sc}
	return fh
}

// errorTime is the timestamp of an error's ErrorInfo, which the SDK sets
// from the clock.
var errorTime = regexp.MustCompile(`"timestamp":"[^"]*"`)

// TestStreamMatchesSDK: for every scenario a new request streams (from the
// start), the stream's data: are the bytes the SDK's own transport (the
// JSON-RPC one, the HTTP+JSON one for _rest) writes for the same call, the handler's SendStreamingMessage
// yielding the same events (what the binding answered before it streamed
// with egress): the same StreamResponse of every event, in the same
// JSON-RPC response, the same error. Only the SSE ids and the error's
// timestamp may differ.
func TestStreamMatchesSDK(t *testing.T) {
	old := now
	now = conformance.Time
	defer func() { now = old }()
	restBody := `{"message":{"messageId":"m-1","contextId":"ctx-001","taskId":"task-002","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	body := `{"jsonrpc":"2.0","id":"req-002","method":"SendStreamingMessage","params":` + restBody + `}`
	for _, c := range streamCases {
		for _, sc := range conformance.Scenarios() {
			if sc.From > 0 || len(sc.Frames) == 0 {
				continue
			}
			t.Run(c.name+"/"+sc.Name, func(t *testing.T) {
				run, err := conformance.Run(sc, func(o *render.Output) render.Renderer {
					return c.newStream(o, sc.RequestID(), 0)
				})
				if err != nil {
					t.Fatal(err)
				}
				ours, err := conformance.SSEData(run.Body)
				if err != nil {
					t.Fatal(err)
				}

				// The SDK's transport over the handler, its
				// SendStreamingMessage answering from the same frames.
				hd := &handler{h: sdkHost(sc)}
				var sdk http.Handler
				r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
				if c.rest {
					sdk = a2asrv.NewRESTHandler(sdkAnswers{hd, sc.RequestID(), c.p})
					r = httptest.NewRequest(http.MethodPost, "/message:stream", strings.NewReader(restBody))
				} else {
					sdk = a2asrv.NewJSONRPCHandler(sdkAnswers{hd, sc.RequestID(), c.p})
				}
				w := httptest.NewRecorder()
				sdk.ServeHTTP(w, r)
				theirs, err := conformance.SSEData(w.Body.Bytes())
				if err != nil {
					t.Fatalf("%v: %s", err, w.Body)
				}
				if len(ours) != len(theirs) {
					t.Fatalf("%d events, the SDK's %d:\n%s\n--- SDK\n%s", len(ours), len(theirs), run.Body, w.Body)
				}
				for i := range ours {
					a, b := errorTime.ReplaceAll(ours[i], []byte(`"timestamp":"T"`)), errorTime.ReplaceAll(theirs[i], []byte(`"timestamp":"T"`))
					if !bytes.Equal(a, b) {
						t.Errorf("event %d:\n%s\nthe SDK's:\n%s", i, a, b)
					}
				}
			})
		}
	}
}

// sdkAnswers is the handler with its SendStreamingMessage answering
// requestID's scenario with parameters p (the publish, the task records
// and the parameters of a real call are the bindings' tests').
type sdkAnswers struct {
	*handler
	requestID string
	p         a2amap.Params
}

func (s sdkAnswers) SendStreamingMessage(ctx context.Context, _ *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	p := streamParams(s.p)
	return v1Events(s.h.V1Answers().A2AEvents(ctx, s.requestID, p, 0), p, func() {})
}

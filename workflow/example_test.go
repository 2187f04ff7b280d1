package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// usersAPI starts an HTTP API answering GET /users with a list of users,
// and returns it with a policy that lets every principal call it. It
// listens on a loopback address, which the executor refuses unless a
// rule names that IP literal exactly, as this one does (port included).
func usersAPI() (*httptest.Server, *workflow.Policy) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/users" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[
			{"id": 1, "name": "Ann", "status": "active", "points": 120},
			{"id": 2, "name": "Bob", "status": "disabled", "points": 40},
			{"id": 3, "name": "Cy", "status": "active", "points": 70},
			{"id": 4, "name": "Dee", "status": "active", "points": 100}
		]`)
	}))
	u, _ := url.Parse(api.URL)
	policy := &workflow.Policy{}
	if err := policy.AllowHosts(u.Host); err != nil {
		panic(err)
	}
	return api, policy
}

// activeUsers is a workflow (JSONL: operationUpdate lines, then
// beginExecution) that fetches the users from api, keeps the active ones,
// sorts them by points and totals their points.
func activeUsers(api string) string {
	return strings.Join([]string{
		`{"type":"operationUpdate","operationId":"fetch","operation":{"ApiCall":{"method":"GET","url":"` + api + `/users","outputPath":"/workflow/users"}}}`,
		`{"type":"operationUpdate","operationId":"active","operation":{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"status","operator":"==","value":"active"}],"outputPath":"/workflow/active"}}}`,
		`{"type":"operationUpdate","operationId":"ranked","operation":{"TransformData":{"inputPath":"/workflow/active","transform":"sort","config":{"field":"points","order":"desc"},"outputPath":"/workflow/ranked"}}}`,
		`{"type":"operationUpdate","operationId":"names","operation":{"TransformData":{"inputPath":"/workflow/ranked","transform":"map","config":{"field":"name"},"outputPath":"/workflow/names"}}}`,
		`{"type":"operationUpdate","operationId":"total","operation":{"TransformData":{"inputPath":"/workflow/active","transform":"aggregate","config":{"operation":"sum","field":"points"},"outputPath":"/workflow/total"}}}`,
		`{"type":"beginExecution","executionId":"report-1","operationOrder":["fetch","active","ranked","names","total"]}`,
	}, "\n")
}

// An executor validates a workflow for a principal (structure, data flow,
// permissions, the API knowledge base of its Policy), then runs it,
// reporting each operation's start and end to an Observer. The outcome
// holds each operation's result by operationId.
func ExampleExecutor_Execute() {
	api, policy := usersAPI()
	defer api.Close()
	exec := workflow.New(workflow.Options{Policy: policy})

	wf, res := exec.Validate("agent-1", activeUsers(api.URL))
	if !res.Valid {
		fmt.Println("invalid:", res.Errors)
		return
	}
	obs := workflow.ObserverFunc(func(_ context.Context, ev workflow.Event) error {
		if ev.Phase == workflow.PhaseStart {
			fmt.Println(ev.Step, ev.Phase, ev.OperationID, ev.Type)
		} else {
			fmt.Println(ev.Step, ev.Phase, ev.OperationID, ev.Status, ev.OutputPath)
		}
		return nil
	})
	out, err := exec.Execute(context.Background(), "agent-1", "req-1", wf, obs)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Status, out.ExecutionID, out.WorkflowExecutionID)
	for _, id := range []string{"names", "total"} {
		b, _ := json.Marshal(out.Results[id])
		fmt.Printf("%s: %s\n", id, b)
	}
	// Output:
	// 1 start fetch ApiCall
	// 1 end fetch success /workflow/users
	// 2 start active FilterData
	// 2 end active success /workflow/active
	// 3 start ranked TransformData
	// 3 end ranked success /workflow/ranked
	// 4 start names TransformData
	// 4 end names success /workflow/names
	// 5 start total TransformData
	// 5 end total success /workflow/total
	// success req-1 report-1
	// names: ["Ann","Dee","Cy"]
	// total: 290
}

// Validate checks a workflow without running it and without a policy;
// each Issue names its line, operation, property and a code. Here the
// filter uses an operator that does not exist, and beginExecution lists
// an operation that was never defined.
func ExampleValidate() {
	res := workflow.Validate(strings.Join([]string{
		`{"type":"operationUpdate","operationId":"fetch","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}}`,
		`{"type":"operationUpdate","operationId":"active","operation":{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"status","operator":"is","value":"active"}],"outputPath":"/workflow/active"}}}`,
		`{"type":"beginExecution","executionId":"exec-1","operationOrder":["fetch","active","notify"]}`,
	}, "\n"))
	fmt.Println("valid:", res.Valid)
	for _, is := range res.Errors {
		fmt.Printf("line %d %s %s: %s\n", is.Line, is.OperationID, is.Field, is.Code)
	}
	// Output:
	// valid: false
	// line 2 active operation.FilterData.conditions[0].operator: invalid_field
	// line 3 notify operationOrder[2]: undefined_operation
}

// The REST API (spec §12) in front of the workflow pool: the API validates
// and publishes each execution (its Submitter, here ingress's publisher),
// an executor serving the pool "workflow" runs it (Executor.Serve, through
// agent.Run) and writes its frames to E2A_RESPONSES, from which the API
// answers (StreamFrames): execute waits for the result, and GET
// /api/v1/executions/{id} rebuilds the status from the frames.
func ExampleAPI() {
	api, policy := usersAPI()
	defer api.Close()

	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The workflow pool: one executor serving it until ctx is done.
	exec := workflow.New(workflow.Options{Policy: policy})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, workflow.Pool, exec) }()

	// The REST API, mounted on a mux (ingress mounts it on its own).
	pub := ingress.NewPublisher(mem.JetStream, 10*time.Second)
	rest := &workflow.API{
		Executor: exec,
		Submitter: submitFunc(func(ctx context.Context, env *e2a.Envelope) error {
			_, err := pub.Publish(ctx, workflow.Pool, env)
			return err
		}),
		Frames: &workflow.StreamFrames{Conn: mem.Conn},
	}
	mux := http.NewServeMux()
	rest.Register(mux)
	front := httptest.NewServer(mux)
	defer front.Close()

	body, _ := json.Marshal(map[string]string{"workflow": activeUsers(api.URL)})
	resp, err := http.Post(front.URL+"/api/v1/workflows/execute", "application/json", strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	var answer struct {
		ExecutionID         string         `json:"execution_id"`
		WorkflowExecutionID string         `json:"workflow_execution_id"`
		Status              string         `json:"status"`
		Results             map[string]any `json:"results"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	fmt.Println("execute:", resp.StatusCode, answer.Status, answer.WorkflowExecutionID)
	fmt.Println("names:", answer.Results["names"], "total:", answer.Results["total"])

	// The execution's status, by the id execute answered.
	resp, err = http.Get(front.URL + "/api/v1/executions/" + url.PathEscape(answer.ExecutionID))
	if err != nil {
		panic(err)
	}
	var st workflow.ExecutionStatus
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode, st.Status)
	for _, op := range st.Operations {
		fmt.Println(" ", op.OperationID, op.Type, op.Status)
	}

	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// execute: 200 success report-1
	// names: [Ann Dee Cy] total: 290
	// status: 200 success
	//   fetch ApiCall success
	//   active FilterData success
	//   ranked TransformData success
	//   names TransformData success
	//   total TransformData success
	// Run: <nil>
}

// submitFunc adapts a function to workflow.Submitter.
type submitFunc func(ctx context.Context, env *e2a.Envelope) error

func (f submitFunc) Submit(ctx context.Context, env *e2a.Envelope) error { return f(ctx, env) }

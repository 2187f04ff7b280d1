package ingress_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// Review of the A2A v1.0 door against the specification (a2a.proto,
// docs/specification.md).

// TestV1ListTasksPageSizeIsSizeUsed: ListTasksResponse.page_size is
// "The page size used for this response" (a2a.proto), and every example of
// §6.5 answers the size asked for with fewer tasks on the page
// ("pageSize": 10 with one task; "pageSize": 20 with one task), as
// a2a-go/v2's own task store does. The pipeline answered the number of
// tasks on the page instead.
func TestV1ListTasksPageSizeIsSizeUsed(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.SendMessage(ctx, userMessage("one task")); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	_, out := v1RPC(t, p, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":10}}`)
	res, ok := out["result"].(map[string]any)
	if !ok {
		t.Fatalf("ListTasks: %v", out)
	}
	if tasks, _ := res["tasks"].([]any); len(tasks) != 1 {
		t.Fatalf("ListTasks listed %d tasks, want 1", len(tasks))
	}
	if res["pageSize"] != float64(10) {
		t.Errorf("ListTasks {pageSize: 10} answered pageSize %v; want 10, the page size used (a2a.proto, §6.5's examples)", res["pageSize"])
	}
	// Without pageSize the size used is the default, 50.
	_, out = v1RPC(t, p, `{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":{}}`)
	if res, _ = out["result"].(map[string]any); res == nil || res["pageSize"] != float64(50) {
		t.Errorf("ListTasks {} answered pageSize %v; want 50 (the default the pipeline applies)", res["pageSize"])
	}
}

// TestV1RESTListTasksUnspecifiedStatusIsNoFilter: ListTasksRequest.status
// is a TaskState enum whose zero value TASK_STATE_UNSPECIFIED is the unset
// field (proto3), i.e. no filter. JSON-RPC ({"status":
// "TASK_STATE_UNSPECIFIED"}, the SDK reads the name as "") and gRPC (pbconv)
// list every task for it; HTTP+JSON's query parameter (§11.5: enums by their
// string value) was refused 400 InvalidParams for the same request (§5.1:
// the bindings are functionally equivalent).
func TestV1RESTListTasksUnspecifiedStatusIsNoFilter(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.SendMessage(ctx, userMessage("listed")); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	_, out := v1RPC(t, p, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"status":"TASK_STATE_UNSPECIFIED"}}`)
	if res, _ := out["result"].(map[string]any); res == nil {
		t.Fatalf("JSON-RPC ListTasks {status: TASK_STATE_UNSPECIFIED}: %v", out)
	}
	r := p.get(t, ingress.A2AV1Path+"/tasks?status=TASK_STATE_UNSPECIFIED")
	body, _ := io.ReadAll(r.Body)
	var list struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if r.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Tasks) != 1 {
		t.Errorf("GET /tasks?status=TASK_STATE_UNSPECIFIED: %d %s; want the unfiltered listing (one task), as JSON-RPC and gRPC answer it",
			r.StatusCode, strings.TrimSpace(string(body)))
	}
}

// TestV1RESTSubscribeUnknownTaskIs404: SubscribeToTask of a task that
// does not exist is TaskNotFoundError (§3.1.6), HTTP 404 on the HTTP+JSON
// binding (§5.4, §11.6: an error answer is google.rpc.Status with the
// HTTP status). The pipeline answers a terminal task's subscription so
// (a plain 400), but an unknown task's opened a 200 event stream and
// sent the error as its one event.
func TestV1RESTSubscribeUnknownTaskIs404(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, err := http.NewRequestWithContext(ctx, method, p.url+ingress.A2AV1Path+"/tasks/no-such-task:subscribe", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s :subscribe: %v", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var st struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &st) != nil || st.Error.Code != http.StatusNotFound {
			t.Errorf("%s /tasks/no-such-task:subscribe: %d %s %q; want 404 with a google.rpc.Status body (TaskNotFoundError)",
				method, resp.StatusCode, resp.Header.Get("Content-Type"), strings.TrimSpace(string(body)))
		}
	}
}

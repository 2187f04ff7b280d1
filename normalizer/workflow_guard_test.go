package normalizer_test

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/workflow"
)

const guardSecret = "sk-live-GUARD-SECRET-42"

// guardWorkflow is a JSONL workflow whose ApiCall carries a literal bearer
// token and a password in its body.
func guardWorkflow() string {
	return `{"type":"operationUpdate","operationId":"a","operation":{"ApiCall":{"method":"POST","url":"https://api.example.com/x",` +
		`"headers":{"Authorization":"Bearer ` + guardSecret + `"},"body":{"password":"` + guardSecret + `"},"outputPath":"/workflow/x"}}}` + "\n" +
		`{"type":"beginExecution","executionId":"exec-g","operationOrder":["a"]}`
}

// TestWorkflowPoolRunsWorkflowMethodOnly: a submission routed to the
// workflow pool (?agent=workflow, or a method rule) whose method is not
// a2e.workflow.execute is refused before anything is published: the
// worker ran its workflow whatever the method, a workflow string never
// scrubbed (POST /a2e?agent=workflow {"type":"tool.run","workflow":…}).
// Queries, cancels and local messages are not submissions.
func TestWorkflowPoolRunsWorkflowMethodOnly(t *testing.T) {
	n := testNormalizer(t)
	routed, err := normalizer.ParseRoutes("default=demo; method:tool.exec=workflow")
	if err != nil {
		t.Fatal(err)
	}
	nr := normalizer.New(normalizer.Config{Routes: routed})
	wf := jsonString(guardWorkflow())
	for name, c := range map[string]struct {
		n      *normalizer.Normalizer
		adapt  string
		body   string
		agent  string
		method string
	}{
		"a2e agent":        {n, normalizer.ProtocolA2E, `{"a2e":"1.0","id":"m1","type":"tool.run","req_id":"r1","workflow":` + wf + `}`, "workflow", "tool.run"},
		"a2e method rule":  {nr, normalizer.ProtocolA2E, `{"a2e":"1.0","id":"m1","type":"tool.exec","req_id":"r1","workflow":` + wf + `}`, "", "tool.exec"},
		"e2a agent":        {n, normalizer.ProtocolE2A, `{"method":"tool.run","params":{"workflow":` + wf + `}}`, "workflow", "tool.run"},
		"a2a agent":        {n, normalizer.ProtocolA2A, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`, "workflow", "message/send"},
		"acp agent prompt": {n, normalizer.ProtocolACP, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`, "workflow", "session/prompt"},
	} {
		adapter, _ := c.n.Adapter(c.adapt)
		res, err := adapter(normalizer.Input{Body: []byte(c.body), Agent: c.agent})
		if err == nil {
			t.Errorf("%s: accepted for pool %q, op %s", name, res.Pool, res.Op)
			continue
		}
		var ne *normalizer.Error
		if !errors.As(err, &ne) || !errors.Is(err, normalizer.ErrInvalidRequest) || normalizer.HTTPStatus(err) != 400 ||
			normalizer.A2ECode(err) != normalizer.A2ECodeInvalidRequest || normalizer.JSONRPCCode(err) != -32600 {
			t.Errorf("%s: %v, want invalid request (400, invalid_request, -32600)", name, err)
			continue
		}
		want := `the workflow pool runs a2e.workflow.execute only (method "` + c.method + `")`
		if !strings.Contains(ne.ClientMessage(), want) || strings.Contains(err.Error(), guardSecret) {
			t.Errorf("%s: %q, want it to say %s", name, ne.ClientMessage(), want)
		}
	}
	// Not submissions: a query, a cancel, a local message; and the
	// workflow method itself.
	for name, c := range map[string]struct {
		adapt, body string
		op          normalizer.Op
	}{
		"a2a tasks/get":    {normalizer.ProtocolA2A, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1"}}`, normalizer.OpQuery},
		"a2a tasks/cancel": {normalizer.ProtocolA2A, `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"t1"}}`, normalizer.OpCancel},
		"acp cancel":       {normalizer.ProtocolACP, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`, normalizer.OpCancel},
		"a2e ping":         {normalizer.ProtocolA2E, `{"a2e":"1.0","id":"m1","type":"ping"}`, normalizer.OpLocal},
		"a2e workflow":     {normalizer.ProtocolA2E, string(a2eWorkflowBody(wf)), normalizer.OpSubmit},
		"e2a workflow":     {normalizer.ProtocolE2A, `{"method":"a2e.workflow.execute","params":{"workflow":` + wf + `}}`, normalizer.OpSubmit},
	} {
		adapter, _ := n.Adapter(c.adapt)
		res, err := adapter(normalizer.Input{Body: []byte(c.body), Agent: normalizer.WorkflowPool})
		if err != nil || res.Op != c.op || res.Pool != normalizer.WorkflowPool {
			t.Errorf("%s: %+v, %v; want op %s for the workflow pool", name, res, err, c.op)
		}
	}
}

// TestE2AWorkflowStringSecrets: the raw E2A door (POST /v1/requests, with
// ?agent=workflow or the built-in route) removes the literal secrets of a
// workflow string as the A2E door does: rewritten as JSONL the worker
// reads the same, the count in provenance, no task_id set from it (the A2E
// door's own). A workflow array is scrubbed by stripSecrets.
func TestE2AWorkflowStringSecrets(t *testing.T) {
	n := testNormalizer(t)
	begin := `{"type":"beginExecution","executionId":"exec-g","operationOrder":["a"]}`
	arr := `[` + strings.Split(guardWorkflow(), "\n")[0] + `,` + begin + `]`
	for name, c := range map[string]struct{ wf, agent string }{
		"jsonl, agent":         {jsonString(guardWorkflow()), "workflow"},
		"jsonl, built-in":      {jsonString(guardWorkflow()), ""},
		"array in a string":    {jsonString(arr), ""},
		"array":                {arr, ""},
		"jsonl, another agent": {jsonString(guardWorkflow()), "mine"},
	} {
		res, err := n.FromE2A(normalizer.Input{Body: []byte(`{"method":"a2e.workflow.execute","request_id":"q1","params":{"workflow":` + c.wf + `}}`), Agent: c.agent})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b, _ := json.Marshal(res.Envelope); strings.Contains(string(b), guardSecret) {
			t.Errorf("%s: the secret is in the envelope: %s", name, b)
		}
		if res.Envelope.TaskID != "" {
			t.Errorf("%s: task_id %q set", name, res.Envelope.TaskID)
		}
		if s, _ := res.Envelope.Provenance.Details[normalizer.DetailStrippedSecrets].(int); s < 2 {
			t.Errorf("%s: stripped_secrets %v, want 2", name, res.Envelope.Provenance.Details[normalizer.DetailStrippedSecrets])
		}
		text, err := workflow.WorkflowText(res.Envelope)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if wf, vr := workflow.Parse(text); !vr.Valid || wf.ExecutionID != "exec-g" {
			t.Errorf("%s: the worker reads %q: %+v", name, text, vr.Errors)
		}
	}
	// A line that is no JSON object hides its secrets: refused with it.
	bad := jsonString(`{"type":"operationUpdate","operationId":"w","operation":{"Wait":{}}}` + "\n" + `{"headers":{"Authorization":"Bearer ` + guardSecret + `"}`)
	_, err := n.FromE2A(normalizer.Input{Body: []byte(`{"method":"a2e.workflow.execute","params":{"workflow":` + bad + `}}`)})
	var ne *normalizer.Error
	if !errors.As(err, &ne) || !errors.Is(err, normalizer.ErrInvalidParams) || len(ne.Lines) != 1 || ne.Lines[0].Line != 2 ||
		normalizer.HTTPStatus(err) != 422 || strings.Contains(err.Error(), guardSecret) {
		t.Fatalf("unreadable line: %v, want invalid params naming line 2", err)
	}
}

// TestWorkflowMessageCap: a workflow of more than MaxWorkflowMessages
// messages is refused, naming the first line past the cap in the
// worker's words, before its messages are decoded: 1M tiny lines cost
// ~240 MB (a map a line), now a few bytes a line. A workflow at the cap is
// read whole; lines are never dropped.
func TestWorkflowMessageCap(t *testing.T) {
	if workflow.MaxLines != normalizer.MaxWorkflowMessages {
		t.Fatalf("workflow.MaxLines %d, normalizer.MaxWorkflowMessages %d", workflow.MaxLines, normalizer.MaxWorkflowMessages)
	}
	const max = normalizer.MaxWorkflowMessages
	op := func(i int) string {
		return `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":1}}}`
	}
	mk := func(ops int, sep string) string {
		var b strings.Builder
		for i := 0; i < ops; i++ {
			b.WriteString(op(i) + sep)
		}
		b.WriteString(`{"type":"beginExecution","executionId":"e","operationOrder":["w"]}`)
		return b.String()
	}
	for _, form := range []string{"jsonl", "array"} {
		text := func(ops int) string {
			if form == "array" {
				return "[" + mk(ops, ",") + "]"
			}
			return mk(ops, "\n\n")
		}
		if _, lines := normalizer.ParseWorkflow(text(max - 1)); lines != nil {
			t.Fatalf("%s: %d messages refused: %v", form, max, lines)
		}
		over := text(max)
		_, lines := normalizer.ParseWorkflow(over)
		wantLine := max + 1
		if form == "jsonl" {
			wantLine = 2*max + 1
		}
		_, vr := workflow.Parse(over)
		if len(lines) != 1 || lines[0].Line != wantLine || len(vr.Errors) != 1 || !strings.HasSuffix(vr.Errors[0].Message, ": "+lines[0].Message) {
			t.Fatalf("%s: %d messages: %+v; the worker: %+v", form, max+1, lines, vr.Errors)
		}
		// A secret past the cap is never published: the A2E door refuses.
		_, err := testNormalizer(t).FromA2E(normalizer.Input{Body: a2eWorkflowBody(jsonString(over))})
		var ne *normalizer.Error
		if !errors.As(err, &ne) || !errors.Is(err, normalizer.ErrInvalidParams) || len(ne.Lines) != 1 || ne.Lines[0].Line != wantLine {
			t.Fatalf("%s: A2E door: %v", form, err)
		}
	}
	for form, text := range map[string]string{
		"jsonl": strings.Repeat("{}\n", 1<<20),
		"array": "[" + strings.Repeat("{},", 1<<20-1) + "{}]",
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, lines := normalizer.ParseWorkflow(text)
		runtime.ReadMemStats(&after)
		if len(lines) != 1 || lines[0].Line != max+1 || !strings.Contains(lines[0].Message, "1048576 messages, more than the 1000 allowed") {
			t.Fatalf("%s: 1Mi messages: %+v", form, lines)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
			t.Errorf("%s: 1Mi tiny messages allocated %d bytes", form, n)
		}
	}
}

// BenchmarkA2EWorkflowMillionLines: the A2E door's cost for a body of
// 1Mi tiny workflow lines ("{}\n"), refused for its size in messages.
func BenchmarkA2EWorkflowMillionLines(b *testing.B) {
	n := testNormalizer(b)
	body := a2eWorkflowBody(jsonString(strings.Repeat("{}\n", 1<<20)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = n.FromA2E(normalizer.Input{Body: body})
	}
}

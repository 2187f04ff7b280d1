package normalizer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestA2EWorkflowTaskID: an a2e.workflow.execute message's task_id is its
// workflow's executionId, as FromWorkflow's is (the id GET
// /api/v1/executions/{id} is asked with), whether the workflow is JSONL
// text (trailing blank lines and CRLF too) or an array of its messages;
// none when its last message is no beginExecution with a valid
// executionId (a workflow the executor refuses: an executionId outside
// its grammar or longer than MaxWorkflowIDLen), nor for another type. It
// had none: the execution was not found by its executionId; then it had
// an executionId of 129 characters, and none for a JSON array of the
// messages in a string, which the worker runs.
func TestA2EWorkflowTaskID(t *testing.T) {
	n := testNormalizer(t)
	const op = `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":1}}}`
	for name, c := range map[string]struct{ workflow, want string }{
		"jsonl":               {`"` + `{\"type\":\"operationUpdate\",\"operationId\":\"w\",\"operation\":{\"Wait\":{}}}\r\n{\"type\":\"beginExecution\",\"executionId\":\"exec-1\",\"operationOrder\":[\"w\"]}\r\n\n  "`, "exec-1"},
		"array":               {`[` + op + `,{"type":"beginExecution","executionId":"exec-2","operationOrder":["w"]}]`, "exec-2"},
		"begin not last":      {`[{"type":"beginExecution","executionId":"exec-3","operationOrder":["w"]},` + op + `]`, ""},
		"id outside grammar":  {`[` + op + `,{"type":"beginExecution","executionId":"exec 4","operationOrder":["w"]}]`, ""},
		"array in a string":   {jsonString(`[` + op + `,{"type":"beginExecution","executionId":"exec-5","operationOrder":["w"]}]`), "exec-5"},
		"id of 128":           {`[` + op + `,{"type":"beginExecution","executionId":"` + strings.Repeat("x", 128) + `","operationOrder":["w"]}]`, strings.Repeat("x", 128)},
		"id of 129":           {`[` + op + `,{"type":"beginExecution","executionId":"` + strings.Repeat("x", 129) + `","operationOrder":["w"]}]`, ""},
		"no workflow":         {`null`, ""},
		"executionId no text": {`[{"type":"beginExecution","executionId":5}]`, ""},
	} {
		res, err := n.FromA2E(normalizer.Input{Body: []byte(`{"a2e":"1.0","id":"m1","type":"` + normalizer.MethodWorkflowExecute +
			`","req_id":"r1","workflow":` + c.workflow + `}`)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Envelope.TaskID != c.want {
			t.Errorf("%s: task_id %q, want %q", name, res.Envelope.TaskID, c.want)
		}
	}
	res, err := n.FromA2E(normalizer.Input{Body: []byte(`{"a2e":"1.0","id":"m1","type":"x/req","req_id":"r1",` +
		`"workflow":[{"type":"beginExecution","executionId":"exec-6","operationOrder":["w"]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Envelope.TaskID != "" {
		t.Errorf("another type: task_id %q, want none", res.Envelope.TaskID)
	}
}

// a2eWorkflowBody is an a2e.workflow.execute message whose workflow field
// is the JSON value wf.
func a2eWorkflowBody(wf string) []byte {
	return []byte(`{"a2e":"1.0","id":"m1","type":"` + normalizer.MethodWorkflowExecute + `","req_id":"r1","workflow":` + wf + `}`)
}

// TestA2EWorkflowIDBound: the executionId the A2E door indexes is one the
// workflow executor's parser (workflow.Parse) accepts, at its length
// bound and one past it.
func TestA2EWorkflowIDBound(t *testing.T) {
	n := testNormalizer(t)
	for _, l := range []int{normalizer.MaxWorkflowIDLen, normalizer.MaxWorkflowIDLen + 1} {
		text := `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":1}}}` + "\n" +
			`{"type":"beginExecution","executionId":"` + strings.Repeat("e", l) + `","operationOrder":["w"]}`
		res, err := n.FromA2E(normalizer.Input{Body: a2eWorkflowBody(jsonString(text))})
		if err != nil {
			t.Fatal(err)
		}
		_, vr := workflow.Parse(text)
		if indexed := res.Envelope.TaskID != ""; indexed != vr.Valid {
			t.Errorf("executionId of %d characters: indexed %v, the workflow parser accepts it: %v %v", l, indexed, vr.Valid, vr.Errors)
		}
	}
}

// TestA2EWorkflowStringSecrets: a workflow sent as a string (JSONL, or a
// JSON array in a string) has the literal secrets of its messages removed,
// as it has sent as an array of messages and through the REST door: the
// same operations reach the worker (workflow.Parse of what is published),
// its vault reference and scheme prefix kept, the same count in
// provenance. The string kept the literal bearer token, stored and shown
// by GET /v1/requests/{id}.
func TestA2EWorkflowStringSecrets(t *testing.T) {
	const secret = "sk-live-SECRET123456"
	n := testNormalizer(t)
	begin := `{"type":"beginExecution","executionId":"exec-s","operationOrder":["a"]}`
	forms := map[string]string{
		"array":             `[` + a2eSecretOp(secret) + `,` + begin + `]`,
		"jsonl":             jsonString(a2eSecretOp(secret) + "\r\n" + begin + "\n"),
		"array in a string": jsonString(` [` + a2eSecretOp(secret) + `,` + begin + `]`),
	}
	var want, wantStripped string
	for _, name := range []string{"array", "jsonl", "array in a string"} {
		res, err := n.FromA2E(normalizer.Input{Body: a2eWorkflowBody(forms[name])})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b, _ := json.Marshal(res.Envelope); strings.Contains(string(b), secret) {
			t.Errorf("%s: the secret is in the envelope: %s", name, b)
		}
		text, err := workflow.WorkflowText(res.Envelope)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wf, vr := workflow.Parse(text)
		if !vr.Valid || wf.ExecutionID != "exec-s" || res.Envelope.TaskID != "exec-s" {
			t.Fatalf("%s: the worker reads %q: %+v, execution %q, task_id %q", name, text, vr.Errors, wf.ExecutionID, res.Envelope.TaskID)
		}
		got, _ := json.Marshal(wf.Operations["a"].Config)
		stripped := fmt.Sprint(res.Envelope.Provenance.Details[normalizer.DetailStrippedSecrets])
		if want == "" {
			want, wantStripped = string(got), stripped
			if !strings.Contains(want, `"X-Key":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "}`) {
				t.Fatalf("the vault reference is not kept: %s", want)
			}
			continue
		}
		if string(got) != want || stripped != wantStripped {
			t.Errorf("%s: the worker gets %s (stripped %s), as an array %s (stripped %s)", name, got, stripped, want, wantStripped)
		}
	}
}

// TestA2EWorkflowStringKeepsLines: the workflow worker names the client's
// lines in its errors after the secrets are removed (blank lines count),
// and a compact workflow without secrets is published as sent (its size,
// held against the workflow limit, kept).
func TestA2EWorkflowStringKeepsLines(t *testing.T) {
	n := testNormalizer(t)
	compact := `{"operation":{"Wait":{"duration":1}},"operationId":"w","type":"operationUpdate"}` + "\n" +
		`{"executionId":"e1","operationOrder":["w"],"type":"beginExecution"}`
	res, err := n.FromA2E(normalizer.Input{Body: a2eWorkflowBody(jsonString(compact))})
	if err != nil || res.Envelope.Params["workflow"] != compact {
		t.Fatalf("compact workflow published as %q (%v), want it as sent", res.Envelope.Params["workflow"], err)
	}
	text := "\n" + a2eSecretOp("x-secret-1") + "\n\n" + `{"type":"beginExecution","executionId":"e1","operationOrder":["zz"]}` + "\n\n"
	res, err = n.FromA2E(normalizer.Input{Body: a2eWorkflowBody(jsonString(text))})
	if err != nil {
		t.Fatal(err)
	}
	published, err := workflow.WorkflowText(res.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	_, sent := workflow.Parse(text)
	_, got := workflow.Parse(published)
	if len(sent.Errors) != 1 || len(got.Errors) != 1 || got.Errors[0].Line != sent.Errors[0].Line {
		t.Errorf("errors of the published workflow %+v, of the one sent %+v", got.Errors, sent.Errors)
	}
}

// TestA2EWorkflowUnreadableRefused: a workflow string holding a message
// that is no JSON object, whose secrets cannot be found, is refused with
// validation_error (the worker's code for it) naming its line, and
// nothing echoes the secret; it was published whole.
func TestA2EWorkflowUnreadableRefused(t *testing.T) {
	n := testNormalizer(t)
	for name, text := range map[string]string{
		"jsonl":             `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{}}}` + "\n" + `{"headers":{"Authorization":"Bearer sk-live-SECRET-2"}`,
		"array in a string": `[{"type":"operationUpdate"}, "Bearer sk-live-SECRET-2"]`,
	} {
		_, err := n.FromA2E(normalizer.Input{Body: a2eWorkflowBody(jsonString(text))})
		var ne *normalizer.Error
		if !errors.As(err, &ne) || normalizer.A2ECode(err) != normalizer.A2ECodeValidationError || len(ne.Lines) != 1 || ne.Lines[0].Line != 2 {
			t.Fatalf("%s: %v: want validation_error naming line 2", name, err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error echoes the secret: %v", name, err)
		}
	}
}

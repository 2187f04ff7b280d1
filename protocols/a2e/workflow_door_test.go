package a2e_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// workflowMessage is an A2E message submitting the workflow text wf.
func workflowMessage(t *testing.T, reqID, wf string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"a2e": "1.0", "id": "w-" + reqID, "type": normalizer.MethodWorkflowExecute, "req_id": reqID, "workflow": wf})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// TestWorkflowTooLargeRefusedAtDoor: a workflow larger than the workflow
// executor takes (workflow.MaxWorkflowBytes) is refused by the front door,
// nothing published, as the REST door refuses it: it was published, and
// the workflow worker then failed it with validation_error (a request
// accepted, then refused later).
func TestWorkflowTooLargeRefusedAtDoor(t *testing.T) {
	h := &fakeHost{BodyLimit: 4 << 20}
	big := `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":1}},"pad":"` +
		strings.Repeat("x", workflow.MaxWorkflowBytes) + `"}`
	rec, msgs := post(t, h, workflowMessage(t, "r-big", big))
	if n := len(h.Published()); n != 0 {
		t.Fatalf("a workflow of %d bytes was published (%d envelopes): it would be refused by the worker", len(big), n)
	}
	if rec.Code != http.StatusRequestEntityTooLarge || len(msgs) != 1 {
		t.Fatalf("status %d, %d lines: %+v", rec.Code, len(msgs), msgs)
	}
	m := msgs[0]
	limit := strconv.Itoa(workflow.MaxWorkflowBytes)
	if m.Type != a2e.ErrorType || m.ReqID != "r-big" || m.Retryable == nil || *m.Retryable ||
		!strings.Contains(m.Message, limit) || !strings.Contains(m.Message, strconv.Itoa(len(big))) {
		t.Errorf("refusal %+v: want a non-retryable error naming the size and the limit %s", m, limit)
	}
	if m.Detail["http_status"] != float64(http.StatusRequestEntityTooLarge) || m.Detail["limit"] != float64(workflow.MaxWorkflowBytes) {
		t.Errorf("detail %v", m.Detail)
	}

	// Refused whole, before any line runs, like the body's other
	// refusals; a workflow at the limit is published.
	h = &fakeHost{BodyLimit: 4 << 20}
	fits := strings.Repeat(" ", workflow.MaxWorkflowBytes)
	rec, msgs = post(t, h, workflowMessage(t, "r-fits", fits)+workflowMessage(t, "r-big", big))
	if len(h.Published()) != 0 || rec.Code != http.StatusRequestEntityTooLarge || len(msgs) != 1 || msgs[0].ReqID != "r-big" {
		t.Errorf("a too large workflow after one at the limit: status %d, %d published, lines %+v", rec.Code, len(h.Published()), msgs)
	}
	h = &fakeHost{BodyLimit: 4 << 20}
	if rec, _ = post(t, h, workflowMessage(t, "r-fits", fits)); len(h.Published()) != 1 || rec.Code != http.StatusOK {
		t.Errorf("a workflow at the limit: status %d, %d published", rec.Code, len(h.Published()))
	}
}

// TestParseErrorNamesLine: a line of the body that is not JSON is
// answered with an error naming its line (1-based, blank lines counted)
// and why; it named neither.
func TestParseErrorNamesLine(t *testing.T) {
	_, msgs := post(t, &fakeHost{}, `{"a2e":"1.0","id":"p1","type":"ping"}`+"\n\n"+`{"a2e":"1.0","id":"c1","type":tool}`+"\n")
	if len(msgs) != 2 || msgs[0].Type != "pong" || msgs[1].Type != a2e.ErrorType {
		t.Fatalf("lines %+v", msgs)
	}
	m := msgs[1]
	if m.Code != normalizer.A2ECodeParseError || !strings.HasPrefix(m.Message, "line 3: ") || !strings.Contains(m.Message, "invalid character") {
		t.Errorf("parse error %q (%s): want it to name line 3 and why", m.Message, m.Code)
	}
	if m.Detail["line"] != float64(3) {
		t.Errorf("detail %v: want line 3", m.Detail)
	}
}

// paddedArrayMessage is an A2E message submitting, as an array of
// messages, a workflow of a Wait whose "pad" holds seps U+2028 (sent raw:
// 3 bytes each in the body, 6 in the JSONL the worker measures, \u2028)
// and xs 'x'; and the size of that JSONL (workflow.WorkflowText).
func paddedArrayMessage(reqID string, seps, xs int) (string, int) {
	op := func(pad string) string {
		return `{"operation":{"Wait":{"duration":1}},"operationId":"w","pad":"` + pad + `","type":"operationUpdate"}`
	}
	begin := `{"executionId":"e-` + reqID + `","operationOrder":["w"],"type":"beginExecution"}`
	size := len(op("")) + 6*seps + xs + len(begin) + 2
	return `{"a2e":"1.0","id":"w-` + reqID + `","type":"` + normalizer.MethodWorkflowExecute + `","req_id":"` + reqID +
		`","workflow":[` + op(strings.Repeat("\u2028", seps)+strings.Repeat("x", xs)) + `,` + begin + `]}` + "\n", size
}

// TestWorkflowMeasuredAsTheWorkerMeasures: the door measures a workflow
// as the worker does (the JSONL of workflow.WorkflowText), whatever the
// body's size: an array workflow padded with U+2028 in a body of half a
// MiB, of MaxWorkflowBytes once written, is published; one byte more is
// refused with the door's 413 body_too_large naming that size. It was
// published (only bodies over the limit were read), then failed by the
// worker.
func TestWorkflowMeasuredAsTheWorkerMeasures(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{workflow.MaxWorkflowBytes, true}, {workflow.MaxWorkflowBytes + 1, false}} {
		_, base := paddedArrayMessage("r-pad", 0, 0)
		body, size := paddedArrayMessage("r-pad", (tc.size-base)/6, (tc.size-base)%6)
		if size != tc.size || len(body) >= workflow.MaxWorkflowBytes {
			t.Fatalf("a body of %d bytes holding a workflow of %d, want %d under %d", len(body), size, tc.size, workflow.MaxWorkflowBytes)
		}
		h := &fakeHost{BodyLimit: 4 << 20}
		rec, msgs := post(t, h, body)
		if !tc.ok {
			// (its type with a \u escape: the same message)
			escaped := strings.Replace(body, `"type":"`+normalizer.MethodWorkflowExecute, `"type":"a2e.workflow\u002eexecute`, 1)
			if hx := (&fakeHost{BodyLimit: 4 << 20}); len(escaped) == len(body) {
				t.Fatal("the type is not escaped")
			} else if rec, _ := post(t, hx, escaped); len(hx.Published()) != 0 || rec.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("the type escaped: status %d, %d published; want 413, nothing published", rec.Code, len(hx.Published()))
			}
		}
		if tc.ok {
			if len(h.Published()) != 1 || rec.Code != http.StatusOK {
				t.Errorf("a workflow of %d bytes: status %d, %d published %+v; want it published", size, rec.Code, len(h.Published()), msgs)
			}
			continue
		}
		if len(h.Published()) != 0 || rec.Code != http.StatusRequestEntityTooLarge || len(msgs) != 1 {
			t.Fatalf("a workflow of %d bytes in a body of %d: status %d, %d published, lines %+v; want 413, nothing published",
				size, len(body), rec.Code, len(h.Published()), msgs)
		}
		if m := msgs[0]; m.Code != "body_too_large" || m.Retryable == nil || *m.Retryable || m.Message != workflow.TooLargeMessage(size) ||
			m.Detail["workflow_bytes"] != float64(size) {
			t.Errorf("refusal %+v: want body_too_large, not retryable, %q", m, workflow.TooLargeMessage(size))
		}
	}
}

package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestWorkflowRESTMeasuredAsTheWorkerMeasures: POST
// /api/v1/workflows/execute measures the workflow the worker measures,
// the canonical JSONL it publishes (one compact line each, a newline
// after each, U+2028 written \u2028): refused with its too_large
// validation error, nothing published, exactly when the worker would
// refuse it. A text of exactly 1 MiB without a final newline (1 MiB + 1
// published), or of 900 KB padded with U+2028, was published and then
// failed by the worker; a text over 1 MiB by blank lines, 1 MiB once
// published, was refused. /validate measures it so too: it answered those
// by the text sent, valid when execute refused it and the other way round.
func TestWorkflowRESTMeasuredAsTheWorkerMeasures(t *testing.T) {
	exec := workflow.New(workflow.Options{})
	// A broker that takes the envelope of a 1 MiB workflow (the workflow
	// twice: its text and its operations).
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(8<<20))
	p := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{})))
	p.Pool(workflow.Pool, exec)
	// (keys in the order the canonical form writes them)
	text := func(id, pad, tail string) string {
		return `{"operation":{"Wait":{"duration":1}},"operationId":"w","pad":"` + pad + `","type":"operationUpdate"}` + "\n" +
			`{"executionId":"` + id + `","operationOrder":["w"],"type":"beginExecution"}` + tail
	}
	sized := func(id string, n int, tail string) string {
		return text(id, strings.Repeat("x", n-len(text(id, "", ""))), tail)
	}
	const max = workflow.MaxWorkflowBytes
	seps := 300_000 // 900 KB sent, 1.8 MB published
	for _, tc := range []struct {
		name, text string
		published  int // the canonical JSONL's size
		ok         bool
	}{
		{"at the limit once published", sized("size-fits", max-1, ""), max, true},
		{"1 MiB sent, 1 MiB + 1 published", sized("size-mib", max, ""), max + 1, false},
		{"900 KB of U+2028", text("size-seps", strings.Repeat("\u2028", seps), ""), len(text("size-seps", "", "")) + 6*seps + 1, false},
		{"over 1 MiB by blank lines, 1 MiB published", sized("size-blank", max-1, "\n\n\n"), max, true},
	} {
		body, _ := json.Marshal(map[string]string{"workflow": tc.text})
		// /validate answers what execute does: it answered valid a text
		// execute refused, and invalid one it ran.
		var v workflow.ValidationResult
		if resp, b := do(t, "POST", p.URL+"/api/v1/workflows/validate", string(body)); resp.StatusCode != http.StatusOK ||
			json.Unmarshal(b, &v) != nil || v.Valid != tc.ok || !tc.ok && (len(v.Errors) == 0 || v.Errors[0].Code != workflow.CodeTooLarge ||
			!strings.Contains(v.Errors[0].Message, workflow.TooLargeMessage(tc.published))) {
			t.Errorf("%s (%d bytes sent): validate %d %.300s; want valid %v, as execute answers", tc.name, len(tc.text), resp.StatusCode, b, tc.ok)
		}
		before := streamMsgs(t, p.JS, streams.RequestsStream)
		resp, b := do(t, "POST", p.URL+"/api/v1/workflows/execute", string(body))
		published := streamMsgs(t, p.JS, streams.RequestsStream) - before
		if tc.ok {
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"`+workflow.StatusSuccess+`"`) || published != 1 {
				t.Errorf("%s (%d bytes sent): %d %.300s, %d published; want 200 success", tc.name, len(tc.text), resp.StatusCode, b, published)
			}
			continue
		}
		var e struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
				Details struct {
					Errors []workflow.Issue `json:"errors"`
				} `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Type != workflow.ValidationError || len(e.Error.Details.Errors) == 0 ||
			e.Error.Details.Errors[0].Code != workflow.CodeTooLarge || !strings.Contains(e.Error.Message, workflow.TooLargeMessage(tc.published)) {
			t.Errorf("%s (%d bytes sent): %d %.400s; want 400 too_large: %q", tc.name, len(tc.text), resp.StatusCode, b, workflow.TooLargeMessage(tc.published))
		}
		if published != 0 {
			t.Errorf("%s: %d published; want none (the worker refuses it)", tc.name, published)
		}
	}
}

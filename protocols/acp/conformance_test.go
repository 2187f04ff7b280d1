package acp

import (
	"encoding/json"
	"flag"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// rendererCases are the renderer conformance cases of the ACP format, by
// name (the registry's completeness check looks for their golden files
// under testdata/<case>/): NDJSON (the framing of stdio) and SSE.
var rendererCases = map[string]bool{Format + "_ndjson": false, Format + "_sse": true}

// TestRendererConformance runs the renderer, NDJSON and SSE, through the
// kit's suite (conformance.TestRenderers: its output step by step against
// testdata/<case>/<scenario>.golden, which go test -run Conformance
// -update rewrites), then checks its messages.
func TestRendererConformance(t *testing.T) {
	var cases []conformance.Case
	for name, sse := range rendererCases {
		cases = append(cases, conformance.Case{Name: name, SSE: sse,
			New: func(o *render.Output, _ conformance.Scenario) render.Renderer {
				return NewRenderer(o, Params{JSONRPCID: json.RawMessage(`42`), SessionID: "s1", SSE: sse})
			},
			Check: func(t *testing.T, sc conformance.Scenario, run *conformance.Result) {
				read := conformance.NDJSONLines
				if sse {
					read = conformance.SSEData
				}
				msgs, err := read(run.Body)
				if err != nil {
					t.Fatal(err)
				}
				checkMessages(t, sc, msgs)
			}})
	}
	conformance.TestRenderers(t, *update, cases...)
}

// checkMessages: notifications decode as acp.SessionNotification, the last
// message is the response to id 42 with a stopReason or an error.
func checkMessages(t *testing.T, sc conformance.Scenario, msgs [][]byte) {
	t.Helper()
	var endErr error
	for _, st := range sc.Steps {
		if st.Kind == conformance.StepEnd {
			endErr = st.Err
		}
	}
	for i, m := range msgs {
		var probe struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal(m, &probe); err != nil {
			t.Fatal(err)
		}
		if i < len(msgs)-1 || (!sc.Final && endErr == nil) {
			var n acpsdk.SessionNotification
			if probe.Method != "session/update" || json.Unmarshal(probe.Params, &n) != nil || n.SessionId != "s1" {
				t.Errorf("message %d is not a session/update: %s", i, m)
			}
			continue
		}
		if string(probe.ID) != "42" {
			t.Errorf("response id %s", probe.ID)
		}
		if probe.Error == nil {
			var pr acpsdk.PromptResponse
			if err := json.Unmarshal(probe.Result, &pr); err != nil || pr.StopReason == "" {
				t.Errorf("result %s", probe.Result)
			}
		}
	}
}

package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestBrowserToolArgsAsJSON: a tool call's arguments and result that an
// agent wrote as JSON text (the trpc interaction spec's function_call
// "args":"{\"city\":\"Beijing\"}", OpenAI's function arguments, which the
// OpenAI and A2A bridges pass on as such) show as the JSON they hold, in
// the transcript and in the frames, as an object's do; they showed as a
// quoted string of escaped quotes ("{\"city\":\"Beijing\"}"). Text that
// is not a JSON object or array stays as it is; the raw frame is the
// frame as sent.
func TestBrowserToolArgsAsJSON(t *testing.T) {
	b := newBrowser(t)
	p := startPipeline(t, pipelineOptions{noAgent: true})
	const id = "tool-args-as-json"
	publishEnvelope(t, p, id, map[string]any{"method": "message/send", "user_id": "u", "params": map[string]any{}})
	natstest.PublishBurst(t, p.nc, id, 0, 0,
		frameOf(t, id, 0, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaTool,
			Delta: e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_001", Name: "get_weather", Args: `{"city":"Beijing"}`}}),
		frameOf(t, id, 1, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaTool,
			Delta: e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: "call_001", Name: "get_weather", Response: `{"temp":"20°C"}`}}),
		frameOf(t, id, 2, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: e2a.DeltaTool,
			Delta: e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "call_002", Name: "echo", Args: `not json {`}}),
		frameOf(t, id, 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "20°C"}}))
	waitFinal(t, p, id)

	b.openRequest(p.url, id)
	b.waitJS("the final frame", `document.querySelector('#frames li.frame[data-final=true]') !== null`, 15*time.Second)
	b.waitJS("the tool's result", `document.querySelector('.t-tool[data-tool=get_weather] .kv:nth-of-type(2) pre') !== null`, 10*time.Second)
	b.shot("transcript")
	args := eval[string](b, `document.querySelector('.t-tool[data-tool=get_weather] .kv:nth-of-type(1) pre').textContent`)
	result := eval[string](b, `document.querySelector('.t-tool[data-tool=get_weather] .kv:nth-of-type(2) pre').textContent`)
	if args != "{\n  \"city\": \"Beijing\"\n}" || result != "{\n  \"temp\": \"20°C\"\n}" {
		t.Errorf("transcript: arguments %q, result %q; want the JSON they hold, pretty-printed", args, result)
	}
	if other := eval[string](b, `document.querySelector('.t-tool[data-tool=echo] .kv:nth-of-type(1) pre').textContent`); other != `"not json {"` {
		t.Errorf("arguments that are no JSON: %q, want the string as it is", other)
	}

	b.run(chromedp.Click(chromedp.CSS(`.tabs button[data-tab=frames]`)))
	call := eval[string](b, `document.querySelector('#frames li.frame[data-seq="0"] .delta code').textContent`)
	resp := eval[string](b, `document.querySelector('#frames li.frame[data-seq="1"] .delta code').textContent`)
	if call != `({"city":"Beijing"})` || resp != `{"temp":"20°C"}` {
		t.Errorf("frames: call %q, result %q; want the JSON they hold", call, resp)
	}
	b.run(chromedp.Click(chromedp.CSS(`#frames li.frame[data-seq="0"] .raw-toggle`)))
	if raw := eval[string](b, `document.querySelector('#frames li.frame[data-seq="0"] pre.raw').textContent`); !strings.Contains(raw, `"args": "{\"city\":\"Beijing\"}"`) {
		t.Errorf("raw frame 0: %s; want the frame as sent", raw)
	}
	b.shot("frames")
}

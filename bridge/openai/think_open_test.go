package openai_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge/openai"
)

// TestThinkOpen: with WithThinkOpen (the model's chat template opens
// <think> in the prompt: DeepSeek-R1's distilled models, Qwen3's
// Thinking-2507), a server without a reasoning parser streams the
// reasoning, </think>, then the answer: the bridge writes the first as
// reasoning and the rest as the answer, its result's content the answer
// alone (the think_open fixture, which openai-go reads first with the tag
// in its content). A server that sends the reasoning apart (the reasoning
// fixture: reasoning_content) keeps its content as the answer; one that
// writes the opened <think> back at the content's start (think_legacy) has
// it taken as the block's tag, never written as reasoning.
func TestThinkOpen(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{up: []openai.Option{openai.WithThinkOpen()}})
	for _, c := range []struct{ fixture, reasoning, text string }{
		{"think_open", "Okay, the user says hi. I should greet them back.\n", "Hello! How can I assist you today?"},
		{"reasoning", fixtures["reasoning"].reasoning, fixtures["reasoning"].content},
		// A server that writes the opened <think> back into the content
		// (llama.cpp's deepseek-legacy): the tag is the block's, not
		// reasoning text.
		{"think_legacy", "Okay, the user says hi. I should greet them back.", "Hello! How can I assist you today?"},
		{"text", "", ""}, // never closed: reasoning whole
	} {
		t.Run(c.fixture, func(t *testing.T) {
			a := read(t, ask(t, p, "", "think-open-"+c.fixture, "fixture:"+c.fixture, nil))
			reasoning, text := c.reasoning, c.text
			if c.fixture == "text" {
				reasoning = fixtures["text"].content
			}
			if a.reasoning != reasoning || a.text != text || a.result["content"] != text {
				t.Errorf("reasoning %q text %q content %v; want %q and %q", a.reasoning, a.text, a.result["content"], reasoning, text)
			}
		})
	}
}

package openai

import (
	"strings"
	"testing"
)

// TestThinkTags: a content that starts with a <think> block is split into
// the block's text (reasoning) and the answer, whatever the deltas cut
// (each case is fed whole, then byte by byte, then in pieces of 3); any
// other content is text as it is, a later <think> included.
func TestThinkTags(t *testing.T) {
	for _, c := range []struct{ in, reasoning, text string }{
		{"<think>\nThe user greets.\n</think>\n\nHello!", "\nThe user greets.\n", "Hello!"},
		{"\n<think>a</think>b", "a", "b"},
		{"Hello <think>not a block</think>", "", "Hello <think>not a block</think>"},
		{"<thin", "", "<thin"},
		{"<think>never closed </th", "never closed </th", ""},
		{"<think></think>", "", ""},
		// Qwen3 not thinking: a block of white space alone is no reasoning.
		{"<think>\n\n</think>\n\nHello", "", "Hello"},
		{"<think> \n", "", ""},
		{"<think>\n\n x</think>y", "\n\n x", "y"},
		{"<think>x</thinker></think>\r\n y", "x</thinker>", " y"},
		{"plain answer", "", "plain answer"},
		{"", "", ""},
	} {
		splitInPieces(t, c.in, c.reasoning, c.text, false)
	}
}

// TestThinkTagsHoldsNothingOnceDecided: a content that is not a block is
// written as it comes (nothing held after its first characters), so its
// first frame is not delayed.
func TestThinkTagsHoldsNothingOnceDecided(t *testing.T) {
	var k thinkTags
	if r, x := k.add("Hi"); r != "" || x != "Hi" {
		t.Fatalf("first delta: %q %q", r, x)
	}
	if r, x := k.add("<"); r != "" || x != "<" {
		t.Fatalf("a later '<' held: %q %q", r, x)
	}
}

// TestThinkTagsOpened: in a block the prompt opened (open), the content is
// reasoning up to </think>, and a <think> it starts with is the block's
// tag written back (llama.cpp's deepseek-legacy), never reasoning text,
// whatever the deltas cut.
func TestThinkTagsOpened(t *testing.T) {
	for _, c := range []struct{ in, reasoning, text string }{
		{"Okay.\n</think>\n\nHello!", "Okay.\n", "Hello!"},
		{"<think>Okay.</think>Hello!", "Okay.", "Hello!"},
		{"\n<think>\nOkay.</think>Hello!", "\nOkay.", "Hello!"},
		{"\n\n</think>\n\nHello", "", "Hello"},
		{"<think>\n\n</think>\n\nHello", "", "Hello"},
		{"never closed <thi", "never closed <thi", ""},
		{"<thi", "<thi", ""},
		{"a <think> later</think>b", "a <think> later", "b"},
		{"", "", ""},
	} {
		splitInPieces(t, c.in, c.reasoning, c.text, true)
	}
}

// splitInPieces checks that thinkTags (opened when opened is set) splits
// in, given whole, byte by byte and in pieces of 3, into reasoning and
// text.
func splitInPieces(t *testing.T, in, reasoning, text string, opened bool) {
	t.Helper()
	for _, size := range []int{len(in) + 1, 1, 3} {
		var k thinkTags
		if opened {
			k.open()
		}
		var gotR, gotT strings.Builder
		for i := 0; i < len(in); i += size {
			r, x := k.add(in[i:min(i+size, len(in))])
			gotR.WriteString(r)
			gotT.WriteString(x)
		}
		r, x := k.end()
		gotR.WriteString(r)
		gotT.WriteString(x)
		if gotR.String() != reasoning || gotT.String() != text {
			t.Errorf("%q in pieces of %d: reasoning %q text %q, want %q and %q", in, size, gotR.String(), gotT.String(), reasoning, text)
		}
	}
}

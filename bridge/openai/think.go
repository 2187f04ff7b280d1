package openai

import "strings"

// The tags a model's reasoning is wrapped in when the server does not
// separate it (vLLM without a reasoning parser, Hugging Face's
// text-generation-inference, LM Studio): the content starts with
// <think>, the reasoning, </think>, then the answer.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkTags splits a content that starts with a <think> block into the
// block's text (reasoning) and what follows (the answer), across deltas
// however the tags are cut between them, as a reasoning parser would. A
// content that does not start with <think> (after white space) is text as
// it is, and nothing is held back once that is known; a <think> later in
// the answer is text. Without it, such a model's reasoning reached the
// client as the answer's text, tags and all.
type thinkTags struct {
	state int // thinkUndecided, thinkInside or thinkDone
	held  string
	// trim: the block has just closed; the answer's leading line breaks
	// (the separator after </think>) are dropped.
	trim bool
	// blank is the block's white space not written yet, until its first
	// other character (spoke): a block of white space alone is no
	// reasoning (Qwen3 not thinking: <think>\n\n</think>).
	blank string
	spoke bool
	// preset: the block was open before the content (WithThinkOpen);
	// begun: some content was added.
	preset, begun bool
}

// open starts k inside a block the prompt opened (WithThinkOpen): the
// content is the block's text from its start, except a <think> it starts
// with, which is the opened block's tag written back (llama.cpp's
// --reasoning-format deepseek-legacy streams the prompt's <think> before
// the reasoning): taken as the tag, it was written as reasoning text.
func (k *thinkTags) open() { k.preset = true }

// apart is told that the server sends the reasoning apart from the
// content (a reasoning member): a block open presumed before any content
// is none, and the content is the answer. Without it, a server given a
// reasoning parser later would have had every answer shown as reasoning.
func (k *thinkTags) apart() {
	if k.preset && !k.begun {
		k.state = thinkDone
	}
}

const (
	thinkUndecided = iota // the content so far may still open with <think>
	thinkInside           // inside the block
	thinkDone             // no block, or after it
)

// add takes the next text of the content and returns what of it is
// reasoning and what is answer, now; what may belong to a tag is held.
func (k *thinkTags) add(s string) (reasoning, text string) {
	k.begun = k.begun || s != ""
	switch k.state {
	case thinkInside:
		return k.inside(s)
	case thinkDone:
		return "", k.answer(s)
	}
	b := k.held + s
	lead := strings.TrimLeft(b, " \t\r\n")
	switch {
	case strings.HasPrefix(lead, thinkOpen):
		k.held, k.state = "", thinkInside
		return k.inside(lead[len(thinkOpen):])
	case strings.HasPrefix(thinkOpen, lead):
		k.held = b // white space, or a start of <think>: not known yet
		return "", ""
	}
	if k.preset {
		k.held, k.state = "", thinkInside
		return k.inside(b)
	}
	k.held, k.state = "", thinkDone
	return "", b
}

// inside takes text inside the block: up to </think> it is reasoning, a
// tail that may start </think> is held, and what follows the tag is the
// answer.
func (k *thinkTags) inside(s string) (reasoning, text string) {
	b := k.held + s
	k.held = ""
	if i := strings.Index(b, thinkClose); i >= 0 {
		k.state, k.trim = thinkDone, true
		return k.reason(b[:i], true), k.answer(b[i+len(thinkClose):])
	}
	for n := min(len(thinkClose)-1, len(b)); n > 0; n-- {
		if strings.HasSuffix(b, thinkClose[:n]) {
			k.held = b[len(b)-n:]
			return k.reason(b[:len(b)-n], false), ""
		}
	}
	return k.reason(b, false), ""
}

// reason returns r, the block's text, as it may be written now: while the
// block holds white space alone, that is held (blank), and dropped when
// the block ends so (closed); once it holds more, all of it is written.
func (k *thinkTags) reason(r string, closed bool) string {
	if k.spoke {
		return r
	}
	r = k.blank + r
	if strings.TrimLeft(r, " \t\r\n") == "" {
		k.blank = r
		if closed {
			k.blank = ""
		}
		return ""
	}
	k.blank, k.spoke = "", true
	return r
}

// answer is s, the answer's text, without the line breaks that separate
// it from the block.
func (k *thinkTags) answer(s string) string {
	if k.trim {
		s = strings.TrimLeft(s, "\r\n")
		k.trim = s == ""
	}
	return s
}

// end returns what is held when the content ends: a start never decided
// is text (reasoning in a block the prompt opened), the tail of a block
// never closed is reasoning (unless the block held white space alone).
func (k *thinkTags) end() (reasoning, text string) {
	held := k.held
	k.held = ""
	if k.state == thinkInside || k.state == thinkUndecided && k.preset {
		return k.reason(held, true), ""
	}
	return "", held
}

package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// MetadataResponseID is the frame metadata key holding the completion's id
// (seed 002: the events of one model call share it).
const MetadataResponseID = "llm_response_id"

// maxToolCalls bounds the tool calls of one completion.
const maxToolCalls = 256

// chunk is one chat.completion.chunk (or an error) of the stream.
type chunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Content          *string         `json:"content"`
	Refusal          *string         `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCall is a streamed tool call being assembled.
type toolCall struct {
	index    int
	id, name string
	args     strings.Builder
	written  bool
}

// turn maps one streamed completion to frames.
type turn struct {
	w        agent.Writer
	maxEvent int
	id       string // the completion's id (llm_response_id)
	model    string
	content  strings.Builder
	finish   string
	usage    json.RawMessage
	calls    []*toolCall // by index
	done     bool        // [DONE] read
}

// read reads the stream to its end ([DONE], or the end of the body after a
// finish_reason), writing the deltas and tool calls as frames.
func (t *turn) read(ctx context.Context, body io.Reader) error {
	sr := newSSEReader(body, t.maxEvent)
	for {
		event, data, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readError(ctx, err)
		}
		if event == "error" {
			return streamError(data)
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			t.done = true
			return nil
		}
		if err := t.chunk(data); err != nil {
			return err
		}
	}
	if t.finish == "" {
		return bridge.Errorf(bridge.CodeUnavailable, true, "upstream ended the stream before its end (no finish_reason, no [DONE])")
	}
	return nil
}

// readError classifies a failure to read the stream.
func readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, errSSE) {
		return &bridge.Error{Code: bridge.CodeProtocol, Message: "upstream answer not understood: " + err.Error(), Err: err}
	}
	return fmt.Errorf("openai: reading the stream: %w", err)
}

// chunk handles one chunk: the first choice's deltas, its finish reason,
// the usage, the completion's id and model.
func (t *turn) chunk(data []byte) error {
	var c chunk
	if err := decodeChunk(data, &c, t.id, t.model); err != nil {
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream sent an event that is not a chat completion chunk: %s", quote(data))
	}
	if isSet(c.Error) {
		return streamError(c.Error)
	}
	if c.Object == "error" {
		return streamError(data)
	}
	if c.ID != "" && t.id == "" {
		t.id = c.ID
		if err := t.w.SetMetadata(map[string]any{MetadataResponseID: c.ID}); err != nil {
			return err
		}
	}
	if c.Model != "" {
		t.model = c.Model
	}
	if isSet(c.Usage) {
		t.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		if err := t.delta(ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finish = *ch.FinishReason
			if err := t.flushCalls(-1); err != nil {
				return err
			}
		}
	}
	return nil
}

// delta writes a choice's text and reasoning deltas and assembles its tool
// call fragments.
func (t *turn) delta(d delta) error {
	if s := reasoning(d); s != "" {
		if err := t.w.Chunk(e2a.DeltaReasoning, s); err != nil {
			return err
		}
	}
	for _, p := range []*string{d.Content, d.Refusal} {
		if p != nil && *p != "" {
			t.content.WriteString(*p)
			if err := t.w.Chunk(e2a.DeltaText, *p); err != nil {
				return err
			}
		}
	}
	for i, tc := range d.ToolCalls {
		idx := i
		if tc.Index != nil {
			idx = *tc.Index
		}
		if err := t.toolFragment(idx, tc); err != nil {
			return err
		}
	}
	return nil
}

// reasoning is a delta's reasoning text: reasoning_content (DeepSeek,
// vLLM, llama.cpp), else reasoning (vLLM's newer name, OpenRouter, Ollama).
// Servers in transition send both with the same text: one is taken.
func reasoning(d delta) string {
	for _, raw := range []json.RawMessage{d.ReasoningContent, d.Reasoning} {
		var s string
		if isSet(raw) && json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// toolFragment adds one fragment to the tool call of index idx. A call
// whose arguments are already a whole JSON value is written as soon as a
// later index starts (a model streams its calls one after another); the
// others are written at the finish reason, so interleaved fragments are
// assembled whole.
func (t *turn) toolFragment(idx int, d toolCallDelta) error {
	i, found := slices.BinarySearchFunc(t.calls, idx, func(c *toolCall, idx int) int { return c.index - idx })
	if !found {
		if len(t.calls) >= maxToolCalls {
			return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed more than %d tool calls", maxToolCalls)
		}
		if err := t.flushCalls(idx); err != nil {
			return err
		}
		t.calls = slices.Insert(t.calls, i, &toolCall{index: idx})
	}
	c := t.calls[i]
	if c.written {
		if strings.TrimSpace(d.Function.Arguments) == "" && (d.Function.Name == "" || d.Function.Name == c.name) {
			return nil
		}
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed a fragment of tool call %d after its arguments were whole", idx)
	}
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	if c.args.Len()+len(d.Function.Arguments) > t.maxEvent {
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed tool call arguments larger than %d bytes", t.maxEvent)
	}
	c.args.WriteString(d.Function.Arguments)
	return nil
}

// flushCalls writes the tool calls not yet written, in index order: all
// of them when before < 0, else those of an index below before whose
// arguments are a whole JSON value.
func (t *turn) flushCalls(before int) error {
	for _, c := range t.calls {
		if c.written || (before >= 0 && (c.index >= before || !json.Valid([]byte(c.args.String())))) {
			continue
		}
		c.written = true
		id := c.id
		if id == "" {
			id = "call_" + strconv.Itoa(c.index)
		}
		if err := t.w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: id, Name: c.name,
			Args: c.args.String()}); err != nil {
			return err
		}
	}
	return nil
}

// result is the final frame's result.
func (t *turn) result() map[string]any {
	r := map[string]any{"content": t.content.String(), "finish_reason": t.finish, "model": t.model}
	if t.usage != nil {
		r["usage"] = t.usage
	}
	return r
}

// upstreamError is the error object of an OpenAI-compatible server.
type upstreamError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// streamError maps an error the upstream sent in its stream (the data of
// an event holding {"error": {...}}, the error object itself, or vLLM's
// {"object": "error", ...}) to an *bridge.Error: rate limits and server
// errors retryable, a refused request or credentials not, anything else
// upstream_failed.
func streamError(raw []byte) error {
	var wrapped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && isSet(wrapped.Error) {
		raw = wrapped.Error
	}
	var ue upstreamError
	if json.Unmarshal(raw, &ue) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		ue.Message = s
	}
	code := strings.Trim(string(ue.Code), `"`)
	n, _ := strconv.Atoi(code)
	kind := strings.ToLower(ue.Type + " " + code)
	if ue.Type == "" && code == "" {
		kind = strings.ToLower(ue.Message) // {"error": "overloaded"}
	}
	msg := "upstream error in the stream: " + oneLine(ue.Message)
	switch {
	case n == 429 || strings.Contains(kind, "rate_limit"):
		return bridge.Errorf(bridge.CodeRateLimited, true, "%s", msg)
	case n >= 500 || strings.Contains(kind, "server_error") || strings.Contains(kind, "overloaded") ||
		strings.Contains(kind, "internal"):
		return bridge.Errorf(bridge.CodeUnavailable, true, "%s", msg)
	case n == 401 || n == 403 || strings.Contains(kind, "auth") || strings.Contains(kind, "permission"):
		return bridge.Errorf(bridge.CodeAuth, false, "%s", msg)
	case n == 400 || n == 404 || n == 422 || strings.Contains(kind, "invalid_request"):
		return bridge.Errorf(bridge.CodeRejected, false, "%s", msg)
	}
	return bridge.Errorf(bridge.CodeFailed, false, "%s", msg)
}

// oneLine is s on one line, at most 200 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	if s == "" {
		return "(no message)"
	}
	return s
}

// isSet reports a JSON value present and not null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Pool is the pool name of the demo agent, the default pool in development.
const Pool = "demo"

// MaxFrames bounds params.frames.
const MaxFrames = 10000

// MaxDelay bounds params.delay_ms.
const MaxDelay = 60 * time.Second

// ToolName is the name of the demo agent's tool.
const ToolName = "lookup"

// Agent is the demo agent. It is resumable.
type Agent struct{}

// New returns the demo agent.
func New() agent.Handler { return Agent{} }

// Resumable reports that the demo agent resumes after the frames already
// written (its output is deterministic).
func (Agent) Resumable() bool { return true }

// Text returns the request's text: params.text, params.content,
// params.query, or the text of the first text block of params.prompt (or
// of params.content_blocks without one: Envelope.PromptBlocks).
func Text(env *e2a.Envelope) string {
	for _, k := range []string{"text", "content", "query"} {
		if s := env.ParamString(k); s != "" {
			return s
		}
	}
	for _, b := range env.PromptBlocks() {
		if m, ok := b.(map[string]any); ok && m["type"] == "text" {
			if s, ok := m["text"].(string); ok {
				return s
			}
		}
	}
	return ""
}

// Pieces splits "You said: text" into n non-empty pieces whose
// concatenation is the reply; the reply is padded with '.' when shorter than
// n runes.
func Pieces(text string, n int) []string {
	if n < 1 {
		return nil
	}
	r := []rune("You said: " + text)
	for len(r) < n {
		r = append(r, '.')
	}
	out := make([]string, n)
	for i := range n {
		out[i] = string(r[i*len(r)/n : (i+1)*len(r)/n])
	}
	return out
}

// event is one frame of the demo's output.
type event struct {
	kind  string
	delta any
}

// Script returns the chunk events of the demo's reply to env (before the
// final frame) and the final content.
func script(env *e2a.Envelope) ([]event, string) {
	text := Text(env)
	n := int(min(max(num(env, "frames", 5), 0), MaxFrames))
	callID := "call_" + shortID(env.RequestID)
	ev := []event{
		{e2a.DeltaReasoning, "Thinking about: " + text},
		{e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: callID, Name: ToolName, Args: map[string]any{"query": text}}},
		{e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: callID, Name: ToolName,
			Response: map[string]any{"result": fmt.Sprintf("found %d characters", len([]rune(text)))}}},
	}
	pieces := Pieces(text, n)
	for _, p := range pieces {
		ev = append(ev, event{e2a.DeltaText, p})
	}
	return ev, strings.Join(pieces, "")
}

// Prefixes of a text that asks the demo to interrupt its turn ([Ask]).
const (
	AskInputPrefix = "ask:input"
	AskAuthPrefix  = "ask:auth"
)

// Ask reports whether env asks the demo to end its turn asking for input
// or for authorization: params.ask (else the A2A message metadata's ask)
// "input" or "auth", or a text starting with [AskInputPrefix] or
// [AskAuthPrefix]. state is e2a.StateInputRequired or
// e2a.StateAuthRequired ("" when it does not ask); topic is the text
// after the prefix, trimmed (the whole text when asked by params).
func Ask(env *e2a.Envelope) (state, topic string) {
	text := Text(env)
	ask := env.ParamString("ask")
	if _, set := env.Params["ask"]; !set {
		ask, _ = env.A2AMetadata["ask"].(string)
	}
	switch ask {
	case "input":
		return e2a.StateInputRequired, text
	case "auth":
		return e2a.StateAuthRequired, text
	}
	for prefix, st := range map[string]string{AskInputPrefix: e2a.StateInputRequired, AskAuthPrefix: e2a.StateAuthRequired} {
		if rest, ok := strings.CutPrefix(text, prefix); ok {
			return st, strings.TrimSpace(rest)
		}
	}
	return "", ""
}

// Question is the demo's message when it interrupts its turn in state
// about topic.
func Question(state, topic string) string {
	if state == e2a.StateAuthRequired {
		if topic == "" {
			return "Authorization required: answer in this task to approve."
		}
		return "Authorization required to look up " + topic + ": answer in this task to approve."
	}
	if topic == "" {
		return "What should I say? Answer in this task."
	}
	return "What should I say about " + topic + "? Answer in this task."
}

// askScript returns the chunk events of an interrupted turn.
func askScript(state, topic string) []event {
	said := "I need more from you first."
	if state == e2a.StateAuthRequired {
		said = "I need your authorization first."
	}
	return []event{{e2a.DeltaReasoning, "Thinking about: " + topic}, {e2a.DeltaText, said}}
}

// Serve streams the demo reply, skipping the frames already written.
func (Agent) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	if env.Params["panic"] == true {
		panic("demo: panic requested")
	}
	delay := time.Duration(min(max(num(env, "delay_ms", 0), 0), MaxDelay.Milliseconds())) * time.Millisecond
	if state, topic := Ask(env); state != "" {
		if err := stream(ctx, w, askScript(state, topic), delay); err != nil {
			return err
		}
		return agent.Interrupt(w, state, Question(state, topic))
	}
	events, content := script(env)
	failCode := env.ParamString("fail")
	if failCode != "" {
		events = events[:min(max(env.ParamInt("fail_after", 0), 0), int64(len(events)))]
	}
	if err := stream(ctx, w, events, delay); err != nil {
		return err
	}
	if failCode != "" {
		retryable, _ := env.Params["retryable"].(bool)
		return w.Fail(failCode, "demo failure requested", retryable)
	}
	return w.Complete(map[string]any{"content": content})
}

// stream writes events as chunk frames, delay apart and delay before the
// final frame, skipping those already written (w.ResumeAfter).
func stream(ctx context.Context, w agent.Writer, events []event, delay time.Duration) error {
	resume := w.ResumeAfter()
	for i, e := range events {
		if int64(i) <= resume {
			continue
		}
		if i > 0 && delay > 0 {
			if err := sleepctx.SleepCause(ctx, delay); err != nil {
				return err
			}
		}
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e.kind, Delta: e.delta}, false); err != nil {
			return err
		}
	}
	if delay > 0 && len(events) > 0 {
		return sleepctx.SleepCause(ctx, delay)
	}
	return nil
}

// Echo returns the echo agent: one text chunk with the request's text, then
// e2a.complete {"content": text}. It is resumable.
func Echo() agent.Handler { return echo{} }

type echo struct{}

func (echo) Resumable() bool { return true }

func (echo) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	text := Text(env)
	if w.ResumeAfter() < 0 {
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}, false); err != nil {
			return err
		}
	}
	return w.Complete(map[string]any{"content": text})
}

// num returns the integer params[key], else a2a_metadata[key] (an A2A
// message's metadata: numbers, or strings of digits), else def.
func num(env *e2a.Envelope, key string, def int64) int64 {
	if _, ok := env.Params[key]; ok {
		return env.ParamInt(key, def)
	}
	switch v := env.A2AMetadata[key].(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
	case int:
		return int64(v)
	case int64:
		return v
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

func shortID(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return fmt.Sprintf("%08x", h.Sum32())
}

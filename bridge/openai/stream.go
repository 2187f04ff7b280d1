package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	// Message is a choice's whole message, sent in a stream by a server
	// that answers a streamed call with the completion as one event: read
	// as the delta when the stream carried none before it (turn.chunk).
	Message *delta `json:"message"`
	// content is the storage of Delta.Content read by readChoice (its
	// spare: no allocation per chunk); unused by encoding/json.
	content contentField
}

type delta struct {
	Content          *contentField   `json:"content"`
	Refusal          *textFragment   `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string       `json:"name"`
		Arguments argsFragment `json:"arguments"`
	} `json:"function"`
}

// toolCall is a streamed tool call being assembled.
type toolCall struct {
	// index is the call's tool_calls[].index (for a call streamed without
	// one, the next after the calls before it); seq orders the calls a
	// server streamed at one index (a new id there is another call).
	index, seq int
	id, name   string
	args       strings.Builder
	written    bool
}

// turn maps one streamed completion to frames.
type turn struct {
	w        agent.Writer
	maxEvent int
	id       string // the completion's id (llm_response_id)
	// callPrefix begins the id the bridge gives a tool call the server
	// streamed without one ("call_<request id>_": unique in the session,
	// which keys its calls by id); "" is "call_".
	callPrefix string
	model      string
	// content is the answer's text, kept for the final frame while it can
	// fit one: past maxContent (the writer's frame bound,
	// agent.MaxFrameBytes; 0: none) it is dropped and omitted is set
	// (keepContent).
	content    strings.Builder
	maxContent int64
	// held is the bytes of the tool calls not yet written (their names
	// and arguments: hold).
	held    int64
	omitted bool
	finish  string
	usage   json.RawMessage
	calls   []*toolCall // by index, then seq
	loose   *toolCall   // the call the fragments without an index continue
	done    bool        // [DONE] read
	// deltas: a delta with text, reasoning, a refusal or tool calls was
	// read (a message after it is not read again).
	deltas bool
	// text and thought join the text and the reasoning deltas so that a
	// character split between two deltas is written whole (textJoin).
	text, thought textJoin
	// think splits a <think> block the content starts with from the
	// answer (thinkTags).
	think thinkTags
	// refusal is the model's refusal (delta.refusal), written as text
	// too: the result says the answer is one (an ACP prompt ends with
	// stopReason refusal).
	refusal strings.Builder
	// last is the chunk read last, whose choices' array the next one is
	// decoded into (decodeChunk).
	last chunk

	// scrub takes the client's credentials out of the upstream's words
	// an error quotes, before they are cut (bridge.Clip).
	scrub func(string) string

	// endCall (when set) ends the call's request, and so the read of its
	// body, with a cause: at the end of the grace after the finish reason
	// (finishGrace), which graceOver then tells.
	endCall   context.CancelCauseFunc
	grace     time.Duration
	graceOver atomic.Bool
}

// errGraceOver ends a call whose answer was complete at its finish reason
// when the server sent neither [DONE] nor the end of the body within the
// grace after it (finishGrace).
var errGraceOver = errors.New("openai: no [DONE] within the grace after the finish reason")

// read reads the stream to its end ([DONE], or the end of the body after a
// finish_reason, or the grace after the finish_reason: endCall), writing
// the deltas and tool calls as frames.
func (t *turn) read(ctx context.Context, body io.Reader) error {
	sr := newSSEReader(body, t.maxEvent)
	sr.scrub = t.scrub
	held, told := false, false
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	for {
		if grace == nil && t.finish != "" && t.endCall != nil && !sr.doneAtHand() {
			// The answer is complete at its finish reason: the usage
			// chunk and [DONE] that may follow are waited for the grace
			// only, which the server's comments (pings) do not renew (a
			// server that pings on and never ends the stream held the
			// call until the request's context ended, then failed it).
			// No grace is needed while the [DONE] is at hand: every line
			// up to it is read without waiting for the upstream.
			grace = time.AfterFunc(t.grace, func() {
				t.graceOver.Store(true)
				t.endCall(errGraceOver)
			})
		}
		// Text waits for the next write while the next event is at hand
		// (an answer received at once is stored as one message with its
		// final frame), and goes out before a read that may wait for the
		// upstream (agent.Hold). Left held at the end: the final frame
		// takes it. Told at the first event (a call retried may find the
		// writer held by the one before), then when it changes (the
		// writer's lock).
		if at := sr.eventAtHand(); !told || at != held {
			held, told = at, true
			agent.Hold(t.w, held)
		}
		event, data, cut, err := sr.next()
		if errors.Is(err, io.EOF) || err != nil && t.graceOver.Load() {
			break // the end, or the grace after the finish reason
		}
		if err != nil {
			return readError(ctx, err)
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" && event != "error" {
			t.done = true
			return nil
		}
		if cut && !json.Valid(data) {
			// The stream ended inside this event's last line: the
			// upstream was cut off, it did not send garbage.
			return readError(ctx, fmt.Errorf("%w: in the event %s", errCut, quote(data, t.scrub)))
		}
		switch event {
		case "", "message": // a chunk
		case "error":
			return streamError(data, t.scrub)
		default:
			// A named event (sse-starlette before 1.4.0 pings with
			// "event: ping" and a timestamp as its data) is no chunk: an
			// EventSource's onmessage never sees it. An error object in
			// it is still the upstream's error, as the official clients
			// read it.
			if isErrorObject(data) {
				return streamError(data, t.scrub)
			}
			continue
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
	if errors.Is(err, errCut) {
		return &bridge.Error{Code: bridge.CodeUnavailable, Retryable: true, Err: err,
			Message: "upstream closed the answer before its end: " + err.Error()}
	}
	return fmt.Errorf("openai: reading the stream: %w", err)
}

// chunk handles one chunk: the first choice's deltas, its finish reason,
// the usage, the completion's id and model.
func (t *turn) chunk(data []byte) error {
	c := &t.last
	if err := decodeChunk(data, c, t.id, t.model); err != nil {
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream sent an event that is not a chat completion chunk: %s", quote(data, t.scrub))
	}
	if isSet(c.Error) {
		return streamError(c.Error, t.scrub)
	}
	if c.Object == "error" {
		return streamError(data, t.scrub)
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
		d := ch.Delta
		if ch.Message != nil && !t.deltas && d.empty() {
			// The whole message, with no delta before it (a server that
			// answers a streamed call with the completion as one event):
			// the answer, never dropped as a chunk without a delta. After
			// streamed deltas it would repeat them: not read.
			d = *ch.Message
		}
		if !d.empty() {
			t.deltas = true
		}
		if err := t.delta(d); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finish = *ch.FinishReason
			if err := t.flushCalls(); err != nil {
				return err
			}
		}
	}
	return nil
}

// delta writes a choice's text and reasoning deltas and assembles its tool
// call fragments.
func (t *turn) delta(d delta) error {
	r := reasoning(d)
	if r != "" || d.Content != nil && d.Content.thinking != "" {
		t.think.apart()
	}
	if err := t.writeReasoning(t.thought.add(r)); err != nil {
		return err
	}
	if d.Content != nil {
		if err := t.writeReasoning(t.thought.add(d.Content.thinking)); err != nil {
			return err
		}
		if err := t.writeContent(t.text.add(string(d.Content.text))); err != nil {
			return err
		}
	}
	if d.Refusal != nil {
		t.keepRefusal(string(*d.Refusal))
		if err := t.writeText(t.text.add(string(*d.Refusal))); err != nil {
			return err
		}
	}
	loose := 0 // fragments without an index in this chunk
	for _, tc := range d.ToolCalls {
		var err error
		if tc.Index != nil {
			err = t.toolFragment(*tc.Index, tc)
		} else {
			err = t.looseFragment(tc, loose > 0)
			loose++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// empty reports a delta without text, reasoning, a refusal or tool calls
// (a role alone, or nothing).
func (d delta) empty() bool {
	return (d.Content == nil || d.Content.text == "" && d.Content.thinking == "") &&
		(d.Refusal == nil || *d.Refusal == "") && reasoning(d) == "" && len(d.ToolCalls) == 0
}

// writeContent writes the content's text: a <think> block it starts with
// as reasoning (thinkTags), the rest as text.
func (t *turn) writeContent(s string) error {
	reasoning, text := t.think.add(s)
	if err := t.writeReasoning(reasoning); err != nil {
		return err
	}
	return t.writeText(text)
}

// writeText writes a text delta (none for "").
func (t *turn) writeText(s string) error {
	if s == "" {
		return nil
	}
	t.keepContent(s)
	return t.w.Chunk(e2a.DeltaText, s)
}

// keepContent adds s to the content the final frame carries, unless the
// content is then larger than a frame (maxContent): a final frame holding
// it would be refused (agent.ErrFrameTooLarge) and written without it
// (content_omitted), so it is dropped at once, not kept to the answer's
// end (it was: as much memory as the text, up to the bridge's answer
// bound, 64 MiB, for a request that could keep none of it;
// TestContentNotKeptPastAFrame).
func (t *turn) keepContent(s string) {
	if t.omitted {
		return
	}
	if t.maxContent > 0 && int64(t.content.Len())+int64(len(s)) > t.maxContent {
		t.omitted = true
		t.content.Reset()
		return
	}
	t.content.WriteString(s)
}

// keepRefusal adds s to the refusal the final frame carries, as much of
// it as fits a frame (maxContent): a longer one is the answer's text too,
// so the final frame is written without the content, with the refusal's
// start alone (withoutContent); the text deltas hold the whole. A refusal
// was kept whole and written whole in that frame too, which the runtime
// refused again: the request ended frame_too_large after its text was
// stored (TestLongRefusal).
func (t *turn) keepRefusal(s string) {
	if t.maxContent > 0 {
		s = s[:min(int64(len(s)), max(t.maxContent-int64(t.refusal.Len()), 0))]
	}
	t.refusal.WriteString(s)
}

// writeReasoning writes a reasoning delta (none for "").
func (t *turn) writeReasoning(s string) error {
	if s == "" {
		return nil
	}
	return t.w.Chunk(e2a.DeltaReasoning, s)
}

// endText writes what waited for the rest of a character when the stream
// ends: a character never completed, U+FFFD.
func (t *turn) endText() error {
	if err := t.writeReasoning(t.thought.end()); err != nil {
		return err
	}
	if err := t.writeContent(t.text.end()); err != nil {
		return err
	}
	reasoning, text := t.think.end()
	if err := t.writeReasoning(reasoning); err != nil {
		return err
	}
	return t.writeText(text)
}

// reasoning is a delta's reasoning text (a textFragment's bytes):
// reasoning_content (DeepSeek, vLLM, llama.cpp), else reasoning (vLLM's
// newer name, OpenRouter, Ollama). Servers in transition send both with
// the same text: one is taken. A member that is not a string is none.
func reasoning(d delta) string {
	for _, raw := range []json.RawMessage{d.ReasoningContent, d.Reasoning} {
		if len(raw) == 0 || raw[0] != '"' {
			continue
		}
		if s, err := decodeText(raw); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// toolFragment adds one fragment to the tool call of index idx: the last
// call started there, or a new one when the fragment is another call's
// start (startsCall: a server that numbers every call 0). A call with a
// name whose arguments are already a whole JSON value is written as soon
// as a later call starts (a model streams its calls one after another);
// the others are written at the finish reason, so interleaved fragments,
// and a name streamed after the arguments, are assembled whole.
func (t *turn) toolFragment(idx int, d toolCallDelta) error {
	c := t.lastAt(idx)
	if c == nil || startsCall(c, d) {
		var err error
		if c, err = t.startCall(idx); err != nil {
			return err
		}
	}
	return t.addFragment(c, d)
}

// looseFragment adds a fragment streamed without an index (Gemini's
// OpenAI-compatible endpoint and some proxies send each call whole, with
// its own id and no index): one that starts another call (startsCall)
// starts the next call, as does one without an id after another fragment
// of the same chunk (two fragments of one chunk are two calls); any other
// continues the last call, so arguments split over chunks assemble.
func (t *turn) looseFragment(d toolCallDelta, again bool) error {
	c := t.loose
	if c == nil || startsCall(c, d) || (again && d.ID == "") {
		next := 0
		if n := len(t.calls); n > 0 {
			if t.calls[n-1].index == math.MaxInt {
				return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed a tool call index out of range")
			}
			next = t.calls[n-1].index + 1
		}
		var err error
		if c, err = t.startCall(next); err != nil {
			return err
		}
		t.loose = c
	}
	return t.addFragment(c, d)
}

// startsCall reports a fragment that starts another call than c, never a
// part of it: one naming another id than c's, or one naming a function
// whose arguments start a second JSON value after c's (a server that
// sends no ids).
func startsCall(c *toolCall, d toolCallDelta) bool {
	return (d.ID != "" && c.id != "" && d.ID != c.id) || (d.Function.Name != "" && secondValue(c, d))
}

// secondValue reports arguments that start a JSON object or array right
// after c's ended one: no JSON continues so (after a whole value comes
// nothing), it is another call's. c's arguments must be a whole value: a
// '}' or ']' inside a string or a nested value ("print(m[i]" then "[j])")
// is not its end.
func secondValue(c *toolCall, d toolCallDelta) bool {
	prev := strings.TrimRight(c.args.String(), " \t\r\n")
	next := strings.TrimLeft(string(d.Function.Arguments), " \t\r\n")
	return prev != "" && next != "" && strings.ContainsAny(prev[len(prev)-1:], "}]") &&
		strings.ContainsAny(next[:1], "{[") && json.Valid([]byte(prev))
}

// lastAt is the last call started at index idx (nil: none).
func (t *turn) lastAt(idx int) *toolCall {
	i := sort.Search(len(t.calls), func(i int) bool { return t.calls[i].index > idx })
	if i > 0 && t.calls[i-1].index == idx {
		return t.calls[i-1]
	}
	return nil
}

// startCall starts a call at index idx, after those already there, once
// the calls before it whose arguments are whole are written.
func (t *turn) startCall(idx int) (*toolCall, error) {
	if len(t.calls) >= maxToolCalls {
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed more than %d tool calls", maxToolCalls)
	}
	if err := t.flush(idx, true); err != nil { // the calls this one follows
		return nil, err
	}
	c := &toolCall{index: idx}
	if prev := t.lastAt(idx); prev != nil {
		c.seq = prev.seq + 1
	}
	i := sort.Search(len(t.calls), func(i int) bool { return t.calls[i].index > idx })
	t.calls = slices.Insert(t.calls, i, c)
	return c, nil
}

// addFragment adds d's id, name and argument fragment to c.
func (t *turn) addFragment(c *toolCall, d toolCallDelta) error {
	if c.written {
		if strings.TrimSpace(string(d.Function.Arguments)) == "" && (d.Function.Name == "" || d.Function.Name == c.name) {
			return nil
		}
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed a fragment of tool call %d after its arguments were whole", c.index)
	}
	if secondValue(c, d) {
		// Another call's arguments, which no id or name tells apart:
		// never concatenated into this call's.
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed a second JSON value into tool call %d's arguments", c.index)
	}
	if c.id == "" {
		c.id = d.ID
	}
	if len(c.name)+len(d.Function.Name)+c.args.Len()+len(d.Function.Arguments) > t.maxEvent {
		return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed tool call arguments larger than %d bytes", t.maxEvent)
	}
	// The name's fragments are joined, as the official clients join them
	// (openai-go's ChatCompletionAccumulator): OpenAI sends it once, whole;
	// a server that splits it is read whole. A fragment equal to the name
	// so far is that name sent whole again (MiniMax M2 behind NIM sends it
	// with every fragment): kept once, as Continue reads it, where the
	// official clients make "read_fileread_file", no function at all.
	before := len(c.name) + c.args.Len()
	if d.Function.Name != c.name {
		c.name += d.Function.Name
	}
	c.args.WriteString(string(d.Function.Arguments))
	return t.hold(len(c.name) + c.args.Len() - before)
}

// hold counts n more bytes of tool calls held, not yet written, and
// refuses them when the calls held are more than is left of the bound on
// the answer's bytes (bridge.AnswerBytesLeft): they could never all be
// written, and the bound counts only what is. A server that streamed a
// call whose arguments never became whole, then more calls (up to
// maxToolCalls of up to maxEvent bytes each, 256 MiB by default), had
// them all held, whatever the bound, until its answer ended.
func (t *turn) hold(n int) error {
	t.held += int64(n)
	if left := bridge.AnswerBytesLeft(t.w); left >= 0 && t.held > left {
		return &bridge.Error{Code: bridge.CodeProtocol, Err: bridge.ErrAnswerTooLarge, Message: fmt.Sprintf(
			"upstream streamed tool calls of %d bytes not yet written, more than the %d bytes left of the bound on the answer's bytes",
			t.held, left)}
	}
	return nil
}

// flushCalls writes the tool calls not yet written, in order.
func (t *turn) flushCalls() error { return t.flush(math.MaxInt, false) }

// flush writes, in order, the tool calls not yet written of an index up
// to upTo (with whole, only those whose arguments are a whole JSON value
// and that have a name and an id, up to the first that has not: a server
// may stream a call's arguments before its id and name, even after the
// next call began; a call written before its id came went out under a
// made-up one, the model's dropped). A call still without a name when it
// must be written is upstream_protocol_error; one without arguments is
// written with "{}".
func (t *turn) flush(upTo int, whole bool) error {
	for _, c := range t.calls {
		if c.written || c.index > upTo {
			continue
		}
		if whole && (c.name == "" || c.id == "" || !json.Valid([]byte(c.args.String()))) {
			break // written with the calls after it, in order
		}
		if c.name == "" {
			// No fragment named its function: a call no client can run
			// or answer, never handed on as a call of "".
			return bridge.Errorf(bridge.CodeProtocol, false, "upstream streamed tool call %d without a function name", c.index)
		}
		c.written = true
		t.held -= int64(len(c.name) + c.args.Len())
		id := c.id
		if id == "" {
			id = cmp.Or(t.callPrefix, "call_") + strconv.Itoa(c.index)
			if c.seq > 0 {
				id += "_" + strconv.Itoa(c.seq)
			}
		}
		args := c.args.String()
		if strings.TrimSpace(args) == "" {
			// No arguments (a function without parameters, from a server
			// that sends none): "{}", the JSON OpenAI sends for such a call
			// (arguments are "the arguments to call the function with ...
			// in JSON format"; "" is no JSON a client can parse).
			args = "{}"
		}
		if err := t.w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: id, Name: c.name,
			Args: args}); err != nil {
			return err
		}
	}
	return nil
}

// result is the final frame's result.
func (t *turn) result() finalResult {
	return finalResult{Content: t.content.String(), FinishReason: t.finish, Model: t.model, Refusal: t.refusal.String(), Usage: t.usage}
}

// finalResult is the final frame's result: encoded as the map it was (its
// members in the map's order, refusal and usage only when there is one),
// without the map and its reflective encoding (15 allocations a request).
type finalResult struct {
	Content      string          `json:"content"`
	FinishReason string          `json:"finish_reason"`
	Model        string          `json:"model"`
	Refusal      string          `json:"refusal,omitempty"`
	Usage        json.RawMessage `json:"usage,omitempty"`
}

// ReportedUsage is the model and the usage the result reports, for the
// bridge's token series (bridge.UsageReporter).
func (r finalResult) ReportedUsage() (string, json.RawMessage) { return r.Model, r.Usage }

// JSONLen is the length of the result's JSON, as json.Marshal writes it
// (bridge.JSONSizer): told when its usage, a raw message json.Marshal
// would compact and escape, is absent or plain (no space, no HTML
// character, nothing beyond ASCII: OpenAI's compact object).
func (r finalResult) JSONLen() (int64, bool) {
	for _, b := range r.Usage {
		if b <= ' ' || b == '<' || b == '>' || b == '&' || b >= utf8.RuneSelf {
			return 0, false
		}
	}
	n := int64(len(`{"content":,"finish_reason":,"model":}`)) + jsonStrLen(r.Content) + jsonStrLen(r.FinishReason) + jsonStrLen(r.Model)
	if r.Refusal != "" {
		n += int64(len(`,"refusal":`)) + jsonStrLen(r.Refusal)
	}
	if len(r.Usage) > 0 {
		n += int64(len(`,"usage":`) + len(r.Usage))
	}
	return n, true
}

// jsonStrLen is the length of s as json.Marshal writes it, quotes
// included: HTML characters, U+2028 and U+2029 escaped, an invalid byte
// written as \ufffd.
func jsonStrLen(s string) int64 {
	n := int64(len(s) + 2)
	for i := 0; i < len(s); i++ {
		n += int64(jsonEscapeExtra[s[i]])
	}
	if utf8.ValidString(s) {
		// U+2028 and U+2029 (3 bytes each) are written \u2028, \u2029.
		if strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029") {
			n += 3 * int64(strings.Count(s, "\u2028")+strings.Count(s, "\u2029"))
		}
		return n
	}
	n = int64(len(s) + 2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n += int64(jsonEscapeExtra[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // \ufffd for 1 byte
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}

// jsonEscapeExtra is what encoding/json's escape of an ASCII byte adds
// to its length (\n: 1, \u003c: 5); 0 for the bytes beyond ASCII.
var jsonEscapeExtra = func() (t [256]uint8) {
	for c := range utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			t[c] = 1
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			t[c] = 5
		}
	}
	return t
}()

// withoutContent is the result of a final frame too large with the
// content: content_omitted instead, and of a refusal (which the content
// holds too) its first maxRefusalOmitted characters ("…" when cut), which
// say the answer is one.
func (r finalResult) withoutContent() map[string]any {
	m := map[string]any{"content_omitted": "larger than a frame: concatenate the text deltas", "finish_reason": r.FinishReason, "model": r.Model}
	if r.Usage != nil {
		m["usage"] = r.Usage
	}
	if r.Refusal != "" {
		m["refusal"] = bridge.Clip(r.Refusal, maxRefusalOmitted, nil)
	}
	return m
}

// maxRefusalOmitted is the most characters of a refusal the final frame
// without the content holds (withoutContent).
const maxRefusalOmitted = 1000

// upstreamError is the error object of an OpenAI-compatible server.
type upstreamError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// streamError maps an error the upstream sent in its stream (the data of
// an event holding {"error": {...}}, the error object itself, vLLM's
// {"object": "error", ...}, or text only, a rate limit when its words say
// so: saysRateLimited) to an *bridge.Error: rate limits, server
// errors and timeouts retryable (as bridge.FromResponse takes 408 and 5xx), a refused request or credentials not, anything else
// upstream_failed. The message is scrubbed (scrub) before it is cut.
func streamError(raw []byte, scrub func(string) string) error {
	return errorObject(raw, "upstream error in the stream: ", scrub)
}

// errorObject is streamError for an error object the upstream sent, its
// message after prefix.
func errorObject(raw []byte, prefix string, scrub func(string) string) error {
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
	msg := prefix + oneLine(ue.Message, scrub)
	switch {
	case n == 429 || strings.Contains(kind, "rate_limit") || ue.Type == "" && code == "" && saysRateLimited(ue.Message):
		// An error given as text only ("Too many requests, please slow
		// down") is a rate limit when its words say so.
		return bridge.Errorf(bridge.CodeRateLimited, true, "%s", msg)
	case n == 408 || n >= 500 || strings.Contains(kind, "timeout") || strings.Contains(kind, "server_error") ||
		strings.Contains(kind, "api_error") || strings.Contains(kind, "overloaded") || strings.Contains(kind, "internal"):
		// 408 and a timeout as FromResponse takes an HTTP 408; "api_error"
		// is Anthropic's error type for its 500.
		return bridge.Errorf(bridge.CodeUnavailable, true, "%s", msg)
	case n == 401 || n == 403 || strings.Contains(kind, "auth") || strings.Contains(kind, "permission"):
		return bridge.Errorf(bridge.CodeAuth, false, "%s", msg)
	case n == 400 || n == 404 || n == 422 || strings.Contains(kind, "invalid_request"):
		return bridge.Errorf(bridge.CodeRejected, false, "%s", msg)
	}
	return bridge.Errorf(bridge.CodeFailed, false, "%s", msg)
}

// saysRateLimited reports an error's text that says the upstream limits
// the rate: "rate limit" (rate_limit, RateLimitError), "too many
// requests", or the status 429 as a word of its own.
func saysRateLimited(s string) bool {
	s = strings.ToLower(s)
	for _, w := range []string{"rate limit", "rate_limit", "ratelimit", "too many requests"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	alnum := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' }
	for i := 0; ; {
		j := strings.Index(s[i:], "429")
		if j < 0 {
			return false
		}
		j += i
		if (j == 0 || !alnum(s[j-1])) && (j+3 == len(s) || !alnum(s[j+3])) {
			return true
		}
		i = j + 3
	}
}

// oneLine is s on one line, scrubbed (scrub, when not nil), then cut to
// at most 200 characters (bridge.Clip).
func oneLine(s string, scrub func(string) string) string {
	s = bridge.Clip(strings.Join(strings.Fields(s), " "), 200, scrub)
	if s == "" {
		return "(no message)"
	}
	return s
}

// isSet reports a JSON value present and not null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// Protocols the harness drives.
const (
	ProtoE2ASSE    = "e2a-sse"
	ProtoE2ANDJSON = "e2a-ndjson"
	ProtoA2AStream = "a2a-stream"
	ProtoA2ASend   = "a2a-send"
	ProtoACP       = "acp"
	// ProtoA2AV1Stream is A2A v1.0 SendStreamingMessage (JSON-RPC binding),
	// what today's official A2A SDKs speak by default.
	ProtoA2AV1Stream = "a2av1-stream"
	// ProtoA2AV1RESTStream is A2A v1.0 SendStreamingMessage on the
	// HTTP+JSON binding (POST /a2a/v1/message:stream).
	ProtoA2AV1RESTStream = "a2av1-rest-stream"
)

// ProtoOpenAIChat is an OpenAI-compatible chat completions stream (POST
// /v1/chat/completions, stream: true): the upstream called directly by
// `e2a bench --bridge openai`, not a protocol of the pipeline (it is not in
// Protocols). Its frames are the content chunks and data: [DONE], the
// final one.
const ProtoOpenAIChat = "openai-chat"

// Protocols lists every protocol, in the order of the usage text.
var Protocols = []string{ProtoE2ASSE, ProtoE2ANDJSON, ProtoA2AStream, ProtoA2ASend, ProtoACP, ProtoA2AV1Stream, ProtoA2AV1RESTStream}

// Paths of the endpoints each protocol posts to.
const (
	PathE2A = "/v1/requests"
	PathA2A = "/a2a"
	PathACP = "/acp"
	// PathA2AV1 is the A2A v1.0 JSON-RPC endpoint.
	PathA2AV1 = "/a2a/v1"
	// PathA2AV1Stream is the A2A v1.0 HTTP+JSON binding's stream.
	PathA2AV1Stream = "/a2a/v1/message:stream"
)

// result is the outcome of one request.
type result struct {
	ttff, e2e time.Duration
	frames    int
	err       error
	// seqErr is set when the frames broke the E2A frame invariants (gap,
	// duplicate, out of order, nothing after the final frame).
	seqErr error
}

// client sends one request of a protocol and reads its answer.
type client struct {
	base   string
	proto  string
	pool   string
	hc     *http.Client
	header http.Header
	params map[string]any
	// sessions are idle ACP sessions.
	sessions chan string
	// tmpl is the request body around the id and the second slot.
	tmplOnce sync.Once
	tmpl     []string
	slots    []int
	tmplErr  error
	path     string
	// expectFrames is the number of E2A frames a request must deliver
	// (0: not checked).
	expectFrames int
}

func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      32 << 10,
	}
	return &http.Client{Transport: tr}
}

// body returns the request body for request id (session: the ACP
// session). The bodies are built from a template made once, so that the
// harness spends little of the machine it measures; ids and sessions are
// [A-Za-z0-9-] and need no escaping.
func (c *client) body(id, session string) ([]byte, string, error) {
	c.tmplOnce.Do(c.makeTemplate)
	if c.tmplErr != nil {
		return nil, "", c.tmplErr
	}
	n := len(id) + len(session)
	for _, p := range c.tmpl {
		n += len(p) + len(id)
	}
	b := make([]byte, 0, n)
	for i, p := range c.tmpl {
		b = append(b, p...)
		if i < len(c.slots) {
			if c.slots[i] == slotSession {
				b = append(b, session...)
			} else {
				b = append(b, id...)
			}
		}
	}
	return b, c.path, nil
}

const (
	slotID = iota
	slotSession
)

func (c *client) makeTemplate() {
	params, err := json.Marshal(c.params)
	if err != nil {
		c.tmplErr = err
		return
	}
	P := string(params)
	const part = `{"kind":"text","text":"bench request"}`
	switch c.proto {
	case ProtoE2ASSE, ProtoE2ANDJSON:
		c.tmpl = []string{`{"request_id":"`, `","method":"chat.send","params":` + P + `}`}
		c.slots = []int{slotID}
		c.path = PathE2A
		if c.pool != "" {
			c.path += "?agent=" + c.pool
		}
	case ProtoA2AStream, ProtoA2ASend:
		method := "message/stream"
		if c.proto == ProtoA2ASend {
			method = "message/send"
		}
		c.tmpl = []string{`{"jsonrpc":"2.0","id":"`, `","method":"` + method + `","params":{"message":{"kind":"message","messageId":"`,
			`","role":"user","parts":[` + part + `]},"metadata":` + P + `}}`}
		c.slots = []int{slotID, slotID}
		c.path = PathA2A
	case ProtoA2AV1Stream:
		c.tmpl = []string{`{"jsonrpc":"2.0","id":"`, `","method":"SendStreamingMessage","params":{"message":{"messageId":"`,
			`","role":"ROLE_USER","parts":[{"text":"bench request"}]},"metadata":` + P + `}}`}
		c.slots = []int{slotID, slotID}
		c.path = PathA2AV1
	case ProtoA2AV1RESTStream:
		c.tmpl = []string{`{"message":{"messageId":"`, `","role":"ROLE_USER","parts":[{"text":"bench request"}]},"metadata":` + P + `}`}
		c.slots = []int{slotID}
		c.path = PathA2AV1Stream
	case ProtoOpenAIChat:
		// The request's id in the user message, as a client's text varies.
		c.tmpl = []string{`{"model":"bench-model","messages":[{"role":"user","content":"bench request `,
			`"}],"stream":true,"stream_options":{"include_usage":true}}`}
		c.slots = []int{slotID}
		c.path = PathChatCompletions
	case ProtoACP:
		// Pipeline parameters travel in _meta.e2a_params (see ingress ACP).
		c.tmpl = []string{`{"jsonrpc":"2.0","id":"`, `","method":"session/prompt","params":{"sessionId":"`,
			`","prompt":[{"type":"text","text":"bench request"}],"_meta":{"e2a_params":` + P + `}}}`}
		c.slots = []int{slotID, slotSession}
		c.path = PathACP
	default:
		c.tmplErr = fmt.Errorf("bench: unknown protocol %q", c.proto)
	}
}

func (c *client) accept() string {
	switch c.proto {
	case ProtoE2ASSE, ProtoA2AStream, ProtoA2AV1Stream, ProtoA2AV1RESTStream, ProtoOpenAIChat:
		return "text/event-stream"
	case ProtoE2ANDJSON:
		return "application/x-ndjson"
	case ProtoACP:
		return "application/x-ndjson, text/event-stream"
	}
	return "application/json"
}

// do sends request id and reads the whole answer; start is the instant the
// request was due (latencies are measured from it, so that a late start
// under open-loop load is counted).
func (c *client) do(ctx context.Context, id string, start time.Time) (res result) {
	var session string
	if c.proto == ProtoACP {
		var err error
		if session, err = c.acquireSession(ctx); err != nil {
			return result{err: err}
		}
		defer c.releaseSession(session)
	}
	body, path, err := c.body(id, session)
	if err != nil {
		return result{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", c.accept())
	for k, v := range c.header {
		req.Header[k] = v
	}
	return c.read(req, id, start, c.proto)
}

// open streams a finished request again: GET /v1/requests/{id}/stream (SSE).
func (c *client) open(ctx context.Context, id string, start time.Time) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+PathE2A+"/"+id+"/stream", nil)
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range c.header {
		req.Header[k] = v
	}
	return c.read(req, id, start, ProtoE2ASSE)
}

// acquireSession takes an idle ACP session, or creates one (session/new):
// an ACP client prompts a session one turn at a time, so each request in
// flight has its own, and sessions are reused across requests as a client
// reuses its session.
func (c *client) acquireSession(ctx context.Context) (string, error) {
	select {
	case s := <-c.sessions:
		return s, nil
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+PathACP,
		strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.SessionID == "" {
		return "", fmt.Errorf("acp session/new: HTTP %d %s %v", resp.StatusCode, out.Error, err)
	}
	return out.Result.SessionID, nil
}

func (c *client) releaseSession(s string) {
	select {
	case c.sessions <- s:
	default:
	}
}

var errNoFinal = errors.New("stream ended without a final frame")

// read sends req and reads its answer in proto: each frame timed, counted
// and (E2A) sequence-checked, until the final frame and the end of the
// body.
func (c *client) read(req *http.Request, id string, start time.Time, proto string) result {
	resp, err := c.hc.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return refusal(resp, id)
	}
	if proto == ProtoA2ASend {
		return readSend(resp.Body, start)
	}
	sseMode := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	rd := readerPool.Get().(*bufio.Reader)
	rd.Reset(resp.Body)
	fr := frameReader{proto: proto, id: id, start: start}
	err = fr.readAll(rd, sseMode)
	rd.Reset(nil)
	readerPool.Put(rd)
	res := fr.res
	switch {
	case err != nil:
		res.err = err
	case !fr.final:
		res.err = errNoFinal
	case fr.failed != nil:
		res.err = fr.failed
	case c.expectFrames > 0 && (proto == ProtoE2ASSE || proto == ProtoE2ANDJSON || proto == ProtoOpenAIChat) && res.frames != c.expectFrames:
		res.err = fmt.Errorf("%d frames, expected %d", res.frames, c.expectFrames)
	}
	return res
}

// refusal is the result of an answer other than 200, with the start of its
// body.
func refusal(resp *http.Response, id string) result {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	// The request's own id out, so that the report counts one
	// refusal's many answers as one kind (JSON-RPC echoes the id).
	b = bytes.ReplaceAll(bytes.TrimSpace(b), []byte(id), []byte("<id>"))
	return result{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)}
}

// readSend reads the single JSON-RPC response of A2A message/send: one
// frame, unless it is an error.
func readSend(body io.Reader, start time.Time) result {
	b, err := io.ReadAll(body)
	if err != nil {
		return result{err: err}
	}
	var m rpcMsg
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil {
		return result{err: fmt.Errorf("a2a-send: %w", err)}
	}
	if len(m.Error) > 0 && string(m.Error) != "null" {
		return result{err: fmt.Errorf("a2a-send: error %s", m.Error)}
	}
	d := time.Since(start)
	return result{ttff: d, e2e: d, frames: 1}
}

// frameReader reads the messages of one streamed answer into res.
type frameReader struct {
	proto string
	id    string
	start time.Time
	chk   e2a.SequenceChecker
	res   result
	// final is set once the final frame is read.
	final bool
	// failed is the failure the final frame reports (nil: it succeeded).
	failed error
}

// readAll reads the answer from rd to its end: SSE events in sseMode, else
// one message a line (NDJSON). A message in error or a read error ends it.
func (f *frameReader) readAll(rd *bufio.Reader, sseMode bool) error {
	var ev sseEvent
	for {
		line, err := readLine(rd)
		var ferr error
		switch {
		case sseMode && (len(line) > 0 || err == nil):
			if done := ev.line(line); done {
				if len(ev.data) > 0 || ev.event != "" {
					ferr = f.message(ev.data, ev.id, ev.event)
				}
				ev.reset()
			}
		case !sseMode && len(bytes.TrimSpace(line)) > 0:
			ferr = f.message(line, "", "")
		}
		if ferr != nil {
			return ferr
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// message classifies one message and counts it when it is a frame.
func (f *frameReader) message(msg []byte, evID, evName string) error {
	isFrame, isFinal, seq, err := classify(f.proto, msg, evID, evName)
	if err != nil || !isFrame {
		return err
	}
	if f.res.frames == 0 {
		f.res.ttff = time.Since(f.start)
	}
	f.res.frames++
	if seq >= 0 && f.res.seqErr == nil {
		if err := f.chk.Add(&e2a.Response{RequestID: f.id, Sequence: seq, IsFinal: isFinal}); err != nil {
			f.res.seqErr = err
		}
	}
	if isFinal {
		f.final = true
		f.res.e2e = time.Since(f.start)
		f.failed = finalFailure(f.proto, msg)
	}
	return nil
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// readLine returns the next line without its line ending (it may be
// returned with io.EOF when the body does not end with a newline).
func readLine(rd *bufio.Reader) ([]byte, error) {
	line, err := rd.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			line, err = rd.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	line = bytes.TrimRight(line, "\r\n")
	return line, err
}

// sseEvent accumulates the fields of one SSE event.
type sseEvent struct {
	id, event string
	data      []byte
}

// line feeds one line; it reports true at the blank line ending an event.
func (e *sseEvent) line(l []byte) bool {
	if len(l) == 0 {
		return true
	}
	if l[0] == ':' {
		return false
	}
	field, value, _ := bytes.Cut(l, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "id":
		e.id = string(value)
	case "event":
		e.event = string(value)
	case "data":
		if len(e.data) > 0 {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, value...)
	}
	return false
}

func (e *sseEvent) reset() { e.id, e.event, e.data = "", "", e.data[:0] }

// rpcMsg is the part of a JSON-RPC message the harness reads.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Error  json.RawMessage `json:"error"`
	Result *struct {
		Kind  string `json:"kind"`
		Final bool   `json:"final"`
	} `json:"result"`
}

// rpcHead is what classify reads of a JSON-RPC message: whether it has
// an id, a method and a result (not null), the raw error, and the
// result's final flag (A2A).
type rpcHead struct {
	id, method, result, final bool
	err                       []byte
}

// scanRPC reads msg's rpcHead from its top-level members and its result's,
// without the reflective decoder, as json.Unmarshal into rpcMsg would;
// false leaves msg to encoding/json (not an object, keys with escapes or in
// another case, a value of another type). Like the E2A classifiers it
// checks what the harness counts, not that every byte is valid JSON: the
// conformance and golden tests check the bytes; the load generator's work
// is kept small because it shares the machine with the system it drives.
func scanRPC(msg []byte) (h rpcHead, ok bool) {
	ok = jsonstr.Members(msg, func(key, val []byte) bool {
		switch string(key) {
		case "id":
			h.id = true
		case "method":
			if len(val) < 2 || val[0] != '"' {
				return string(val) == "null"
			}
			h.method = len(val) > 2
		case "error":
			h.err = val
		case "result":
			h.result, h.final = false, false
			if string(val) == "null" {
				return true
			}
			h.result = true
			return jsonstr.Members(val, func(k, v []byte) bool {
				switch {
				case string(k) == "kind":
					return string(v) == "null" || (len(v) >= 2 && v[0] == '"')
				case string(k) == "final":
					switch string(v) {
					case "true":
						h.final = true
					case "false", "null":
						h.final = false
					default:
						return false
					}
				case bytes.EqualFold(k, []byte("final")), bytes.EqualFold(k, []byte("kind")):
					return false
				}
				return true
			})
		default:
			for _, k := range rpcKeys {
				if bytes.EqualFold(key, []byte(k)) {
					return false
				}
			}
		}
		return true
	})
	return h, ok
}

// rpcKeys are the members rpcMsg reads, for the case-insensitive matches
// encoding/json would make.
var rpcKeys = []string{"id", "method", "error", "result"}

// v1Terminal are the terminal task states of A2A v1.0 as they are written.
var v1Terminal = [][]byte{[]byte(`"TASK_STATE_COMPLETED"`), []byte(`"TASK_STATE_FAILED"`), []byte(`"TASK_STATE_CANCELED"`),
	[]byte(`"TASK_STATE_REJECTED"`)}

var (
	finalMark = []byte(`"is_final":true`)
	seqMark   = []byte(`"sequence":`)
)

// classify reads one message of an answer: whether it is a frame (an
// event the client counts), whether it is the last, its E2A sequence (-1
// when the protocol does not carry one) and an error for an error message.
func classify(proto string, msg []byte, evID, evName string) (isFrame, isFinal bool, seq int64, err error) {
	switch proto {
	case ProtoE2ASSE:
		return classifyE2ASSE(msg, evID, evName)
	case ProtoE2ANDJSON:
		return classifyE2ANDJSON(msg)
	case ProtoOpenAIChat:
		return classifyChat(msg)
	case ProtoA2AV1Stream, ProtoA2AV1RESTStream:
		return classifyV1(proto, msg)
	case ProtoA2AStream, ProtoACP:
		return classifyRPC(proto, msg)
	}
	return false, false, -1, fmt.Errorf("unknown protocol %q", proto)
}

// classifyE2ASSE reads an E2A SSE event: a frame whose id is its
// sequence, unless it is an error event.
func classifyE2ASSE(msg []byte, evID, evName string) (isFrame, isFinal bool, seq int64, err error) {
	if evName == "error" || evID == "" {
		return false, false, -1, fmt.Errorf("error event: %s", msg)
	}
	seq, perr := strconv.ParseInt(evID, 10, 64)
	if perr != nil {
		return false, false, -1, fmt.Errorf("bad event id %q", evID)
	}
	return true, bytes.Contains(msg, finalMark), seq, nil
}

// classifyE2ANDJSON reads an E2A NDJSON line: a frame with its sequence,
// unless it is an error line.
func classifyE2ANDJSON(msg []byte) (isFrame, isFinal bool, seq int64, err error) {
	if bytes.HasPrefix(msg, []byte(`{"error"`)) {
		return false, false, -1, fmt.Errorf("error line: %s", msg)
	}
	i := bytes.Index(msg, seqMark)
	if i < 0 {
		return false, false, -1, fmt.Errorf("line without sequence: %.200s", msg)
	}
	rest := msg[i+len(seqMark):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	seq, perr := strconv.ParseInt(string(rest[:j]), 10, 64)
	if perr != nil {
		return false, false, -1, fmt.Errorf("bad sequence in %.200s", msg)
	}
	return true, bytes.Contains(msg, finalMark), seq, nil
}

// classifyV1 reads an A2A v1.0 stream message (JSON-RPC, or the HTTP+JSON
// binding's StreamResponse): a frame when it has a result, the last when
// that result is in a terminal state (v1.0 has no final flag: the stream
// ends on a terminal state).
func classifyV1(proto string, msg []byte) (isFrame, isFinal bool, seq int64, err error) {
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if proto == ProtoA2AV1RESTStream {
		// A StreamResponse alone, or the binding's error.
		if bytes.HasPrefix(msg, []byte(`{"error"`)) {
			return false, false, -1, fmt.Errorf("%s: error %s", proto, msg)
		}
		m.Result = msg
	} else if err := json.Unmarshal(msg, &m); err != nil {
		return false, false, -1, fmt.Errorf("%s: %w", proto, err)
	}
	if len(m.Error) > 0 && string(m.Error) != "null" {
		return false, false, -1, fmt.Errorf("%s: error %s", proto, m.Error)
	}
	if len(m.Result) == 0 {
		return false, false, -1, nil
	}
	terminal := false
	for _, st := range v1Terminal {
		if bytes.Contains(m.Result, st) {
			terminal = true
		}
	}
	return true, terminal, -1, nil
}

// classifyRPC reads a JSON-RPC message of A2A v0.3 message/stream (a frame
// per result, the last with final: true) or of ACP (a frame per
// notification; the response of session/prompt ends the turn).
func classifyRPC(proto string, msg []byte) (isFrame, isFinal bool, seq int64, err error) {
	m, ok := scanRPC(msg)
	if !ok {
		var full rpcMsg
		if err := json.Unmarshal(msg, &full); err != nil {
			return false, false, -1, fmt.Errorf("%s: %w", proto, err)
		}
		m = rpcHead{id: len(full.ID) > 0, method: full.Method != "", err: full.Error,
			result: full.Result != nil, final: full.Result != nil && full.Result.Final}
	}
	if len(m.err) > 0 && string(m.err) != "null" {
		return false, false, -1, fmt.Errorf("%s: error %s", proto, m.err)
	}
	if proto == ProtoA2AStream {
		return m.result, m.final, -1, nil
	}
	if m.method {
		return true, false, -1, nil
	}
	// The JSON-RPC response of session/prompt ends the turn.
	return true, m.id && m.result, -1, nil
}

// finalFailure reads the outcome of a request from its final frame: an
// error when the agent failed it (E2A: an e2a.error frame or status failed;
// A2A v0.3: state failed, canceled or rejected; A2A v1.0: a terminal state
// other than TASK_STATE_COMPLETED), nil otherwise (an A2A state asking for
// input or authentication is not a failure). Only the final frame is read,
// once a request, so that the hot path stays the classifiers' byte search.
// The error names the outcome, not the request, so that the report counts
// each kind once.
func finalFailure(proto string, msg []byte) error {
	switch proto {
	case ProtoE2ASSE, ProtoE2ANDJSON:
		status, kind := member(msg, "status"), member(msg, "response_kind")
		if string(status) == `"failed"` || string(kind) == `"`+e2a.KindError+`"` {
			return failure("final frame "+word(kind)+", status "+word(status), member(member(msg, "body"), "code"))
		}
	case ProtoA2AStream:
		status := member(member(msg, "result"), "status")
		switch st := member(status, "state"); string(st) {
		case `"failed"`, `"canceled"`, `"rejected"`:
			return failure(proto+": final state "+word(st), a2aErrorCode(status))
		}
	case ProtoA2AV1Stream, ProtoA2AV1RESTStream:
		res := msg
		if proto == ProtoA2AV1Stream {
			res = member(msg, "result")
		}
		obj := member(res, "statusUpdate")
		if obj == nil {
			obj = member(res, "task")
		}
		status := member(obj, "status")
		switch st := member(status, "state"); string(st) {
		case `"TASK_STATE_FAILED"`, `"TASK_STATE_CANCELED"`, `"TASK_STATE_REJECTED"`:
			return failure(proto+": final state "+word(st), a2aErrorCode(status))
		}
	}
	return nil
}

// failure is the error of a request its final frame failed: what, and the
// error code when the frame has one.
func failure(what string, code []byte) error {
	if len(code) > 0 {
		what += ", code " + word(code)
	}
	return errors.New(what)
}

// word is a JSON string value without its quotes (any other value as it
// stands).
func word(v []byte) string {
	if in, ok := jsonstr.Plain(v); ok {
		return string(in)
	}
	return string(v)
}

// a2aErrorCode is the pipeline's error code in an A2A status's message
// (metadata.error.code), if any.
func a2aErrorCode(status []byte) []byte {
	return member(member(member(member(status, "message"), "metadata"), "error"), "code")
}

// member returns the raw value of the JSON object obj's member key, nil
// when obj is not an object or has no such member.
func member(obj []byte, key string) []byte {
	var val []byte
	jsonstr.Members(obj, func(k, v []byte) bool {
		if string(k) == key {
			val = v
			return false
		}
		return true
	})
	return val
}

var (
	chatDone    = []byte("[DONE]")
	chatContent = []byte(`"delta":{"content":"`)
)

// classifyChat reads one event of a chat completions stream: a content
// chunk (a delta with text) is a frame, data: [DONE] the final one; the
// role, finish and usage chunks are not frames; an error object fails the
// request. Like the E2A classifiers it checks what the harness counts.
func classifyChat(msg []byte) (isFrame, isFinal bool, seq int64, err error) {
	switch {
	case bytes.Equal(bytes.TrimSpace(msg), chatDone):
		return true, true, -1, nil
	case bytes.HasPrefix(msg, []byte(`{"error"`)):
		return false, false, -1, fmt.Errorf("%s: error %.200s", ProtoOpenAIChat, msg)
	}
	i := bytes.Index(msg, chatContent)
	return i >= 0 && len(msg) > i+len(chatContent) && msg[i+len(chatContent)] != '"', false, -1, nil
}

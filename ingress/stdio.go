package ingress

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// ServeACPStdio serves ACP over stdio, as an editor expects of an agent it
// spawns: newline-delimited JSON-RPC 2.0 messages read from in, answers and
// session/update notifications written to out, one message per line. Each
// message is decoded and answered by the same code as POST /acp of s
// (package jsonrpc and the calls of package protocols/acp, its registered
// endpoint), so both transports behave the same (the envelopes' channel is
// "stdio"). Under s's auth (WithAuth) each message is authenticated with
// the credential ctx carries (WithStdioCredential, the editor's, which
// `e2a acp` reads from its environment), whose principal then owns the
// session's turns exactly as over HTTP; a message it no longer
// authenticates (a key removed, a token expired) is refused with -32000
// (-32003 for a disabled principal). Without a credential messages run as
// the anonymous principal, refused with -32000 when the auth has no none
// scheme; without auth, as the anonymous principal. Nothing but protocol
// messages is written to out. A line
// over the body limit is answered -32600 to the id found at its start
// (overlongID), so the client's call returns.
//
// Requests run concurrently: several prompts may stream at once, and a
// session/cancel read while a prompt streams cancels it (also before its
// request was published: the cancel then waits until the request's publish
// was sent, so it is stored after the request, which is what the workers'
// cancel watch needs to see it), ending the prompt with stopReason
// "cancelled". A session/cancel cancels the session's prompts in flight,
// the one read last first, each once the cancel of the one read after it
// is stored, and its handler runs after them (cancelSession): a queued
// prompt runs once the prompt before it has ended, so a running prompt
// cancelled before the queued one's cancel is stored lets the queued one
// run, and end before its cancel reaches it. The prompts of one session
// are its turns in the order read: a prompt runs once the session's
// prompt read before it was published (its turn recorded) or ended, and
// its streamed lines are written once that prompt's answer was, so that no
// update of it comes before that answer; other calls and sessions never
// wait.
// "$/cancel_request" cancels one request by id: a session/prompt as above,
// anything else by stopping its handler and answering -32800 (a request it
// passed to an agent pool is cancelled in the pipeline too); which call is
// which is the endpoint's host.Lines. Each line is
// written with one Write, under a lock, so lines never interleave.
//
// A cancel ends only the turns it names, as of when it is read:
// "$/cancel_request" the request in flight with that JSON-RPC id (none if
// it has ended), session/cancel the session's turns read before it (this
// connection's prompts in flight, and the unended turns its handler finds
// recorded in the session). A prompt of the session read after a
// session/cancel runs once that cancel's handler returned, as over HTTP,
// where the notification is answered after its handler: otherwise the
// handler, reading the session late, would cancel the new prompt (a client
// that abandons a prompt and prompts again at once saw the second end
// "cancelled").
//
// It returns nil at the end of in, once every request in flight has been
// answered, or when ctx is done (in-flight handlers are stopped; a read
// blocked on in is abandoned). It returns the error of a failed write to out
// or of reading in.
func ServeACPStdio(ctx context.Context, in io.Reader, out io.Writer, s *Server) error {
	for _, p := range s.opts.protocols.All() {
		if pe, ok := endpointOf(protocolHost{s: s}, p.Service); ok && slices.Contains(p.Paths, "stdio") {
			return s.serveLines(ctx, in, out, s.rpcEndpointOf(pe))
		}
	}
	return errors.New("ingress: no protocol of the registry is served over stdio")
}

// serveLines serves the JSON-RPC endpoint e (its Lines set) over lines of
// in and out, as ServeACPStdio describes.
func (s *Server) serveLines(ctx context.Context, in io.Reader, out io.Writer, e rpcEndpoint) error {
	base, stop := context.WithCancel(ctx)
	defer stop()
	c := &stdioConn{s: s, e: e, out: &lineOut{w: out}, base: base, calls: map[string]*stdioCall{},
		prompts: map[string]map[*stdioCall]bool{}, cancels: map[string]map[*stdioCall]bool{}, turns: map[string]*stdioCall{}}
	c.hook, _ = ctx.Value(stdioHookKey{}).(func(event, method string))
	lines := make(chan stdioLine)
	go readLines(bufio.NewReaderSize(in, 64<<10), s.opts.maxBody, lines, base.Done())
	for {
		select {
		case <-ctx.Done():
			stop()
			c.wg.Wait()
			return nil
		case ln, ok := <-lines:
			if !ok {
				c.wg.Wait()
				return c.out.error()
			}
			if ln.err != nil {
				stop()
				c.wg.Wait()
				return ln.err
			}
			c.dispatch(ln)
			if err := c.out.error(); err != nil {
				stop()
				c.wg.Wait()
				return err
			}
		}
	}
}

type stdioLine struct {
	data    []byte // of a line over the limit, its first overlongKept bytes
	tooLong bool
	err     error
}

// overlongKept is how much of a line over the limit readLines keeps: the
// start of the message, where its JSON-RPC id is (overlongID).
const overlongKept = 64 << 10

// readLines sends the lines of r (without their newline) until EOF; lines
// longer than limit are reported as such, with only their first
// overlongKept bytes.
func readLines(r *bufio.Reader, limit int64, lines chan<- stdioLine, done <-chan struct{}) {
	defer close(lines)
	send := func(l stdioLine) bool {
		select {
		case lines <- l:
			return true
		case <-done:
			return false
		}
	}
	for {
		var line []byte
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = r.ReadSlice('\n')
			switch {
			case !tooLong && int64(len(line)+len(chunk)) <= limit+2:
				line = append(line, chunk...)
			case !tooLong:
				tooLong = true
				line = bytes.Clone(line[:min(len(line), overlongKept)])
				fallthrough
			case len(line) < overlongKept:
				line = append(line, chunk[:min(len(chunk), overlongKept-len(line))]...)
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		// The bound above leaves room for a "\r\n" end; the message
		// itself is held to the limit, as a POST body is.
		if msg := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")); !tooLong && int64(len(msg)) > limit {
			tooLong = true
			line = line[:min(len(line), overlongKept)]
		}
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			if !send(stdioLine{data: bytes.TrimSpace(line), tooLong: tooLong}) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				send(stdioLine{err: err})
			}
			return
		}
	}
}

// lineOut writes whole lines, one Write each, under a lock; after the first
// failed write it writes nothing more.
type lineOut struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (o *lineOut) line(b []byte) error {
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if _, err := o.w.Write(buf); err != nil {
		o.err = err
	}
	return o.err
}

func (o *lineOut) error() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

type stdioConn struct {
	s    *Server
	e    rpcEndpoint
	out  *lineOut
	base context.Context
	wg   sync.WaitGroup

	mu      sync.Mutex
	calls   map[string]*stdioCall          // in flight, by canonical JSON-RPC id
	prompts map[string]map[*stdioCall]bool // session id → prompts in flight
	cancels map[string]map[*stdioCall]bool // session id → session/cancel calls being handled
	turns   map[string]*stdioCall          // session id → its session/prompt read last, in flight
	seq     uint64                         // calls registered

	hook func(event, method string) // tests only (stdioHookKey)
}

// stdioHookKey is the context key of a test hook of ServeACPStdio, called
// with event "wait" when a call waits for a session/cancel read before it
// (or, a session/cancel, for the cancels of the session's prompts in
// flight: cancelSession), "cancel-wait" when such a cancel waits for a
// prompt's publish, "run" when its handler starts and "done" when it
// returned (stdio_export_test.go).
type stdioHookKey struct{}

// stdioCall is one request in flight.
type stdioCall struct {
	seq       uint64    // the order read, from 1 (register)
	received  time.Time // when its line was read: host.Call.Received, in the order read
	idKey     string
	id        json.RawMessage
	sessionID string // of a turn (session/prompt)
	prompt    bool   // a turn: the cancel method cancels its request and lets it end
	requestID string // the pipeline request id the call publishes, if any
	ctx       context.Context
	cancel    context.CancelFunc
	canceled  atomic.Bool // by $/cancel_request
	// published is closed once the call's publish was sent (whatever its
	// outcome): a cancel of its request waits for it (cancelPipeline).
	published     chan struct{}
	publishedOnce sync.Once
	// handled, of a session/cancel, is closed when its handler returned;
	// after are those of the session's cancels read before a turn, which
	// it waits for. cancelled, of a session/cancel, is closed once the
	// cancels of the session's prompts in flight were sent
	// (cancelSession), which its handler waits for.
	handled   chan struct{}
	after     []chan struct{}
	cancelled <-chan struct{}
	// recorded, of a turn, is closed once its publish was sent (its turn
	// recorded in the session before that) or it ended; before is that of
	// the session's turn read before it, which it waits for, so that the
	// session's turns are recorded, and so run, in the order read; and
	// beforeEnded is closed when that turn's answer was written, which its
	// streamed lines wait for, so that no update of it comes before that
	// answer.
	recorded     chan struct{}
	recordedOnce sync.Once
	before       chan struct{}
	beforeEnded  <-chan struct{}
}

// sent is called once the call's publish was sent, whatever its outcome.
func (call *stdioCall) sent() {
	if call.published != nil {
		call.publishedOnce.Do(func() { close(call.published) })
	}
	call.markRecorded()
}

// markRecorded closes recorded (of a turn): it was recorded, or ended.
func (call *stdioCall) markRecorded() {
	if call.recorded != nil {
		call.recordedOnce.Do(func() { close(call.recorded) })
	}
}

// peek is what the dispatcher reads of a message before handing it over.
type peek struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// isResponse reports whether the message is a JSON-RPC response (no
// method, a result or an error): the server sends the client no requests,
// and a response is never answered (JSON-RPC 2.0 §5), which a client
// would read as the answer to its own call of that id.
func (p *peek) isResponse() bool {
	return p.Method == "" && p.ID != nil && (p.Result != nil || p.Error != nil)
}

func (c *stdioConn) dispatch(ln stdioLine) {
	// A byte order mark that starts a line is dropped: RFC 8259 §8.1 lets
	// a parser ignore it, and .NET's UTF-8 writer puts one first. It was
	// a parse error answered to id null, to which no call returns.
	ln.data = bytes.TrimLeft(bytes.TrimPrefix(ln.data, utf8BOM), " \t")
	if len(ln.data) == 0 && !ln.tooLong {
		return
	}
	if ln.tooLong {
		// Answered to its id, found at the start of the line, so that the
		// client's call returns (an error to id null answers no request).
		limit := strconv.FormatInt(c.s.opts.maxBody, 10)
		e := jsonrpc.InvalidRequest("message exceeds the body limit of " + limit +
			" bytes (E2A_MAX_BODY_BYTES raises it); send large content as a resource_link")
		e.Data = map[string]any{"limit": c.s.opts.maxBody}
		b, _ := json.Marshal(jsonrpc.ErrorResponse(overlongID(ln.data), e))
		_ = c.out.line(b)
		return
	}
	var pk peek
	if len(ln.data) > 0 && ln.data[0] == '{' && json.Unmarshal(ln.data, &pk) != nil {
		// The handler answers the error, to the id read from the line's
		// start when the whole cannot be decoded (nested past
		// encoding/json's 10,000 levels, cut off, broken after the id),
		// so that the client's call returns.
		pk = peek{ID: overlongID(ln.data)}
	}
	if pk.isResponse() {
		c.s.opts.log.Debug("stdio: a response line ignored (the server sent no request)", "id", string(readableID(pk.ID)))
		return
	}
	lines := c.e.lines
	if pk.ID == nil && pk.Method == lines.CancelMethod {
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(pk.Params, &params)
		c.cancelRequest(params.RequestID)
		return
	}
	lc := lines.Classify(pk.Method, pk.Params)
	call := &stdioCall{id: pk.ID, received: time.Now()}
	call.ctx, call.cancel = context.WithCancel(c.base)
	hdr := http.Header{}
	if lc.Publishes && (pk.ID != nil || lc.Turn) {
		// The pipeline request id is fixed before the handler runs, so a
		// cancel can name the request before it is even published: a
		// prompt sent as a notification too (a turn of the session all
		// the same, which a session/cancel read after it cancels).
		call.requestID = newRequestID()
		hdr.Set("Idempotency-Key", call.requestID)
		call.ctx = withFreshID(call.ctx, call.requestID) // not a client's: published without a lookup
		call.published = make(chan struct{})
	}
	switch {
	case lc.Turn:
		call.prompt = true
		call.sessionID = lc.Session
		call.recorded = make(chan struct{})
	case lc.CancelsTurns:
		call.cancelled = c.cancelSession(lc.Session)
		call.sessionID = lc.Session
		call.handled = make(chan struct{})
	}
	if call.published != nil || call.recorded != nil {
		call.ctx = withPublishSent(call.ctx, call.sent)
	}
	c.register(call)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.unregister(call)
		c.waitBefore(call, pk.Method)
		if c.hook != nil {
			c.hook("run", pk.Method)
		}
		c.run(call, ln.data, hdr)
		if c.hook != nil {
			c.hook("done", pk.Method)
		}
	}()
}

// overlongID returns the JSON-RPC id of a message from the start of its
// line (a line over the limit, of which only that is kept, or one that
// cannot be decoded whole): the value of
// its "id" member when it comes before any member cut off there (clients
// write it before "params", as acp-go-sdk does), nil (null) otherwise. The
// values before it are skipped, not decoded.
func overlongID(start []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(start))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil // cut off
		}
		if t == "id" {
			if _, err := canonicalID(v); err != nil {
				return nil
			}
			return v
		}
	}
	return nil
}

// readableID returns id when a response may echo it (UTF-8, a string,
// number or null), nil (null) otherwise.
func readableID(id json.RawMessage) json.RawMessage {
	if _, err := canonicalID(id); err != nil || !utf8.Valid(id) {
		return nil
	}
	return id
}

// utf8BOM is the UTF-8 byte order mark.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// waitBefore waits, for call (a turn), until the handlers of the
// session/cancel calls read before it returned, so they cannot cancel it,
// and until the session's turn read before it was recorded (or ended), so
// that it is recorded after that one. Only the part of a prompt up to its
// publish waits here; its streamed lines then wait for that turn's answer
// (stdioResponse.after), which the agents end before this turn starts.
// For a session/cancel it waits until the cancels of the session's prompts
// in flight were sent (cancelSession), so that its handler, which cancels
// the session's unended turns it finds recorded, cancels none of them
// before the cancel of a prompt read after it is stored.
func (c *stdioConn) waitBefore(call *stdioCall, method string) {
	if call.cancelled != nil {
		select {
		case <-call.cancelled:
		default:
			if c.hook != nil {
				c.hook("wait", method)
			}
			select {
			case <-call.cancelled:
			case <-call.ctx.Done():
			}
		}
		return
	}
	if len(call.after) > 0 && c.hook != nil {
		c.hook("wait", method)
	}
	if call.before != nil {
		select {
		case <-call.before:
		case <-call.ctx.Done():
			return
		}
	}
	for _, ch := range call.after {
		select {
		case <-ch:
		case <-call.ctx.Done():
			return
		}
	}
}

func (c *stdioConn) register(call *stdioCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	call.seq = c.seq
	if call.id != nil {
		if k, err := canonicalID(call.id); err == nil {
			if _, dup := c.calls[k]; !dup {
				call.idKey = k
				c.calls[k] = call
			}
		}
	}
	if call.prompt {
		for cc := range c.cancels[call.sessionID] {
			call.after = append(call.after, cc.handled)
		}
		if call.sessionID != "" {
			if prev := c.turns[call.sessionID]; prev != nil {
				call.before, call.beforeEnded = prev.recorded, prev.ctx.Done() // canceled by unregister
			}
			c.turns[call.sessionID] = call
		}
	}
	if call.prompt && call.requestID != "" {
		addCall(c.prompts, call)
	}
	if call.handled != nil {
		addCall(c.cancels, call)
	}
}

// addCall adds call to m under its session id.
func addCall(m map[string]map[*stdioCall]bool, call *stdioCall) {
	calls := m[call.sessionID]
	if calls == nil {
		calls = map[*stdioCall]bool{}
		m[call.sessionID] = calls
	}
	calls[call] = true
}

// removeCall removes call from m.
func removeCall(m map[string]map[*stdioCall]bool, call *stdioCall) {
	if calls := m[call.sessionID]; calls != nil {
		delete(calls, call)
		if len(calls) == 0 {
			delete(m, call.sessionID)
		}
	}
}

func (c *stdioConn) unregister(call *stdioCall) {
	call.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if call.idKey != "" && c.calls[call.idKey] == call {
		delete(c.calls, call.idKey)
	}
	if call.prompt {
		removeCall(c.prompts, call)
		call.markRecorded()
		if c.turns[call.sessionID] == call {
			delete(c.turns, call.sessionID)
		}
	}
	if call.handled != nil {
		removeCall(c.cancels, call)
		close(call.handled)
	}
}

// cancelSession cancels in the pipeline the prompts of the session this
// connection has in flight (read before the session/cancel), the one read
// last first, each once its publish was sent and the cancel of the one
// read after it is stored (cancelPublished); the channel it returns is
// closed once all were (nil with none). The session/cancel's handler,
// which then cancels the session's unended turns recorded (those of other
// connections too, protocolHost.CancelTurns, newest first as well), waits
// for it (waitBefore).
//
// The order is what ends a queued prompt cancelled: the agent runtime
// runs a turn once the turn before it has its final frame, and the worker
// holding it reads its stored cancel then (agent/turns.go), so its cancel
// must be stored before the turn it waits for can end. The prompt queued
// behind a running one is often not published yet when the cancel is read
// (it is published once the running one is recorded, and its publish takes
// a round trip), and its cancel can only be sent after that publish; sent
// first, the running prompt's cancel ends it, the queued prompt is
// published, runs at once and may end before its own cancel reaches its
// worker: answered end_turn, and a turn of the session's history.
func (c *stdioConn) cancelSession(sessionID string) <-chan struct{} {
	c.mu.Lock()
	var calls []*stdioCall
	for call := range c.prompts[sessionID] {
		calls = append(calls, call)
	}
	c.mu.Unlock()
	if len(calls) == 0 {
		return nil
	}
	slices.SortFunc(calls, func(a, b *stdioCall) int { return cmp.Compare(b.seq, a.seq) })
	done := make(chan struct{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		for _, call := range calls {
			c.cancelPublished(call)
		}
	}()
	return done
}

// cancelPipeline cancels call's request in the pipeline once its publish
// was sent (cancelPublished), in the background.
func (c *stdioConn) cancelPipeline(call *stdioCall) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.cancelPublished(call)
	}()
}

// cancelPublished cancels call's request in the pipeline once its publish
// was sent, and returns once the cancel is stored (agent.Cancel waits for
// its acknowledgement) or failed. A cancel stored before its request can
// be missed by a worker that starts in between (agent.Cancel: cancel a
// request after it is published), and the request is published on the
// same connection as the cancel, so the server stores it first. A call
// that ended without publishing has nothing to cancel.
func (c *stdioConn) cancelPublished(call *stdioCall) {
	select {
	case <-call.published:
	default:
		if c.hook != nil {
			c.hook("cancel-wait", "session/prompt") // tests: the cancel waits for this publish
		}
	}
	select {
	case <-call.published:
	case <-call.ctx.Done():
		select {
		case <-call.published:
		default:
			return // never published
		}
	}
	if err := c.s.cancel(c.base, call.requestID); err != nil && c.base.Err() == nil {
		c.s.opts.log.Warn("acp stdio: cancel failed", "request_id", call.requestID, "err", err)
	}
}

// cancelRequest handles $/cancel_request.
func (c *stdioConn) cancelRequest(id json.RawMessage) {
	k, err := canonicalID(id)
	if err != nil {
		return
	}
	c.mu.Lock()
	call := c.calls[k]
	c.mu.Unlock()
	if call == nil {
		return
	}
	if call.prompt {
		if call.requestID != "" {
			c.cancelPipeline(call)
		}
		return // it ends with stopReason "cancelled"
	}
	// Stop the handler first; run answers -32800 and only then cancels the
	// request in the pipeline, so the agent's final "cancelled" frame can
	// never answer the call first.
	call.canceled.Store(true)
	call.cancel()
}

// run answers one message as POST /acp does, with the same decoding,
// dispatch and handlers (package jsonrpc, the endpoint's calls), and no
// HTTP between:
// answers are written as lines, a streamed answer line by line.
func (c *stdioConn) run(call *stdioCall, line []byte, hdr http.Header) {
	s := c.s
	in := host.Call{Ctx: call.ctx, Header: hdr, Channel: "stdio", Received: call.received}
	w := &stdioResponse{hdr: http.Header{}, out: c.out, after: call.beforeEnded, ctx: call.ctx}
	defer func() {
		w.finish()
		if call.canceled.Load() && call.requestID != "" {
			defer c.cancelPipeline(call)
		}
		if call.canceled.Load() && !w.responded && call.id != nil {
			w.response(jsonrpc.ErrorResponse(call.id, c.e.lines.Cancelled))
		}
	}()
	calls, batch, derr := jsonrpc.Decode(line, jsonrpc.DecodeOptions{})
	if derr != nil {
		// To the id the dispatcher read, when it could (a line that is
		// not UTF-8 is JSON all the same), so that the client's call
		// returns: an error to id null answers no request.
		w.response(jsonrpc.ErrorResponse(readableID(call.id), derr))
		return
	}
	p, f, ok := s.stdioGate(in.Ctx, c.e.protocol, len(calls), func() bool {
		return !batch && calls[0].Err == nil && host.IsCancelRequest(&calls[0].Request, c.e.cancels)
	})
	if !ok {
		return // cancelled
	}
	if f != nil {
		refuseCalls(w, calls, batch, &Error{Code: f.RPCCode, Message: f.Message, Data: f.Data})
		return
	}
	if batch {
		resps := jsonrpc.Batch(in.Ctx, calls, c.e.streaming, func(ctx context.Context, req *Request) (any, *Error) {
			var v valueReply
			c.e.call(&v, in.WithContext(ctx), p, req)
			return v.result, v.err
		})
		if len(resps) > 0 {
			w.response(resps)
		}
		return
	}
	if first := calls[0]; first.Err != nil {
		w.response(jsonrpc.ErrorResponse(first.Request.ID, first.Err))
		return
	}
	req := &calls[0].Request
	if req.IsNotification() {
		c.e.call(&valueReply{}, in, p, req)
		return
	}
	c.e.call(stdioReply{w: w, id: req.ID}, in, p, req)
}

// stdioReply answers one stdio call: a response line, or the lines of a
// streamed answer.
type stdioReply struct {
	w  *stdioResponse
	id json.RawMessage
}

var _ host.Reply = stdioReply{}

func (r stdioReply) Result(v any)   { r.w.response(jsonrpc.ResultResponse(r.id, v)) }
func (r stdioReply) Error(e *Error) { r.w.response(jsonrpc.ErrorResponse(r.id, e)) }
func (r stdioReply) Refuse(f failure) {
	r.Error(&Error{Code: f.RPCCode, Message: f.Message, Data: f.Data})
}
func (r stdioReply) Header() http.Header         { return r.w.hdr }
func (r stdioReply) Stream() http.ResponseWriter { return r.w }

// stdioResponse writes the answer of one stdio message: responses as one
// line each, and, as the http.ResponseWriter a streamed answer (NDJSON) is
// rendered into, that body cut into lines, each written to stdout as one
// message; empty lines (NDJSON keep-alives) are dropped. Status and headers
// are ignored.
type stdioResponse struct {
	hdr       http.Header
	out       *lineOut
	buf       []byte
	responded bool // a response (not a notification) was written
	// after, when not nil, is waited for (or ctx's end) before the first
	// streamed line is written: the end of the answer of the session's turn
	// read before this one.
	after <-chan struct{}
	ctx   context.Context
}

func (w *stdioResponse) Header() http.Header { return w.hdr }
func (w *stdioResponse) WriteHeader(int)     {}
func (w *stdioResponse) Flush()              {}

func (w *stdioResponse) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if err := w.emit(w.buf[:i]); err != nil {
			return 0, err
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

func (w *stdioResponse) emit(line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if w.after != nil {
		select {
		case <-w.after:
		case <-w.ctx.Done():
		}
		w.after = nil
	}
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method == "" {
		w.responded = true
	}
	return w.out.line(line)
}

// response writes one JSON-RPC response (or a batch's array) as a line.
func (w *stdioResponse) response(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(jsonrpc.ErrorResponse(nil, jsonrpc.InternalError("the answer could not be encoded")))
	}
	w.responded = true
	_ = w.out.line(b)
}

func (w *stdioResponse) finish() {
	if len(w.buf) > 0 {
		_ = w.emit(w.buf)
		w.buf = nil
	}
}

// newRequestID is a pipeline request id (a UUIDv7) fixed before the call
// runs.
func newRequestID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// canonicalID returns a map key for a JSON-RPC id: strings as their JSON
// encoding, numbers in a canonical decimal form (1, 1.0 and 1e0 are one
// id), null as "null".
func canonicalID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty id")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case nil:
		return "null", nil
	case string:
		b, _ := json.Marshal(x)
		return string(b), nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return strconv.FormatInt(n, 10), nil
		}
		if lit := x.String(); !strings.ContainsAny(lit, ".eE") {
			// An integer beyond int64: its literal is its exact decimal
			// (JSON writes no leading zeros). As a float64, two such ids
			// were one key, and a cancel named the other call.
			return lit, nil
		}
		if f, err := x.Float64(); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64), nil
		}
		return x.String(), nil
	}
	return "", errors.New("id must be a string, a number or null")
}

// refuseCalls answers the calls of one line refused as a whole (auth, rate
// limit) with e, each to its own id, as a client waits for it (answered to
// id null, an SDK's call never returned): a batch's as a batch, nothing
// for notifications.
func refuseCalls(w *stdioResponse, calls []jsonrpc.Call, batch bool, e *Error) {
	var resps []jsonrpc.Response
	for _, c := range calls {
		if !c.Request.IsNotification() {
			resps = append(resps, jsonrpc.ErrorResponse(c.Request.ID, e))
		}
	}
	switch {
	case len(resps) == 0:
	case batch:
		w.response(resps)
	default:
		w.response(resps[0])
	}
}

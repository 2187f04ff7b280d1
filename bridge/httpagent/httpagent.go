package httpagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
)

// Accept is the Accept header of every call: the answers the bridge reads,
// frames preferred to a plain text.
const Accept = "application/x-ndjson, text/event-stream, application/json, text/plain;q=0.5"

// Upstream is an HTTP agent: it POSTs each request's envelope to its URL
// and writes the answer through as the request's frames (see the package
// documentation). It is safe for concurrent use.
type Upstream struct {
	c   *bridge.Client
	url string
	cfg config
}

var (
	_ bridge.Upstream = (*Upstream)(nil)
	_ bridge.Scrubber = (*Upstream)(nil)
)

// New returns the upstream that POSTs to c's base URL (credentials,
// timeouts and trace context are c's). Errors wrap bridge.ErrInvalidOption.
func New(c *bridge.Client, opts ...Option) (*Upstream, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", bridge.ErrInvalidOption)
	}
	cfg := config{maxFrameBytes: DefaultMaxFrameBytes, maxFrames: DefaultMaxFrames, log: slog.Default(), maxTurns: DefaultMaxHistoryTurns}
	if err := option.Apply(bridge.ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	return &Upstream{c: c, url: c.Base().String(), cfg: cfg}, nil
}

// Name is "http" and the upstream's scheme and host (never its path,
// query or credentials).
func (u *Upstream) Name() string { return "http " + u.c.Name() }

// Scrub takes the client's credentials out of s (bridge.Scrubber).
func (u *Upstream) Scrub(s string) string { return u.c.Scrub(s) }

// Call POSTs env (with its conversation's earlier turns: WithHistory)
// and writes the answer's frames through w.
func (u *Upstream) Call(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	hist, err := u.history(ctx, env)
	if err != nil {
		return err
	}
	body, err := e2a.MarshalEnvelope(withoutSecrets(env))
	if err == nil {
		body, err = withHistory(body, hist)
	}
	if err != nil {
		return fmt.Errorf("httpagent: envelope: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("httpagent: request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", Accept)
	resp, err := u.c.Do(req, env)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// A body without a length or chunks ends when the connection closes:
	// its end may be the connection's, not the agent's.
	c := &call{u: u, ctx: ctx, env: env, w: w, closeDelimited: bridge.CloseDelimited(resp)}
	ct := resp.Header.Get("Content-Type")
	switch mediaType(ct) {
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/jsonlines", "application/x-jsonlines",
		"application/stream+json": // Spring WebFlux's name for it before application/x-ndjson
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		return c.stream(newNDJSONReader(br, u.cfg.maxFrameBytes))
	case "text/event-stream":
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		return c.stream(newSSEReader(br, u.cfg.maxFrameBytes))
	case "application/json":
		// A value cut short by a close-delimited body's end is the
		// connection's; any other garbage is the agent's, not retried.
		return c.single(resp.Body)
	case "text/plain":
		return c.text(resp.Body, ct)
	}
	return protocolError(ErrContentType, "upstream answered %d with Content-Type %q (want application/x-ndjson, text/event-stream, application/json or text/plain)",
		resp.StatusCode, clip(ct, u.Scrub))
}

// text writes a text/plain answer as the request's result, a string (as
// the JSON answer "…" would be), its trailing line breaks dropped (echo,
// print). It must be UTF-8 (or US-ASCII, or ISO-8859-1, a Java servlet's
// default, decoded), not empty, and within the frame bound. Unlike JSON, a
// text cannot tell a close-delimited body cut short from one that ended:
// what arrived before the end is the answer (if anything did). A byte
// order mark starting it is no part of it. A text whose first line is an
// E2A frame (as NDJSON or SSE) is refused: an agent that set no
// Content-Type (Go's net/http then sniffs text/plain) would otherwise
// have its frames shown as one text.
func (c *call) text(body io.Reader, ct string) error {
	_, params, _ := mime.ParseMediaType(ct)
	latin1 := false
	switch cs := strings.ToLower(params["charset"]); cs {
	case "", "utf-8", "utf8", "us-ascii":
	case "iso-8859-1", "latin1":
		latin1 = true
	default:
		return protocolError(ErrContentType, "upstream answered text/plain in charset %q (want utf-8)", clip(cs, c.u.Scrub))
	}
	max := c.u.cfg.maxFrameBytes
	data, err := io.ReadAll(io.LimitReader(body, int64(max)+1))
	if err != nil {
		return c.readError(err)
	}
	if len(data) > max {
		return protocolError(ErrFrameTooLarge, "upstream text answer is larger than %d bytes", max)
	}
	if len(data) == 0 && c.closeDelimited {
		// Nothing came before the connection's close: a cut, as an
		// NDJSON or SSE answer so ended (a handler that failed after
		// its headers, a connection dropped).
		return c.readError(io.EOF)
	}
	data = bytes.TrimRight(bytes.TrimPrefix(data, utf8BOM), "\r\n")
	if latin1 {
		data = latin1ToUTF8(data)
	}
	switch {
	case len(data) == 0:
		return protocolError(ErrBadFrame, "upstream answered an empty text/plain body")
	case !utf8.Valid(data):
		return protocolError(ErrBadFrame, "upstream text answer is not valid UTF-8")
	case framesAsText(data):
		return protocolError(ErrContentType, "upstream answered text/plain, but its body holds E2A frames: "+
			"set Content-Type application/x-ndjson (or text/event-stream)")
	}
	result, err := json.Marshal(string(data))
	if err != nil {
		return fmt.Errorf("httpagent: text answer: %w", err)
	}
	c.n++
	return c.w.Complete(rawResult(result))
}

// latin1ToUTF8 decodes ISO-8859-1 (each byte its code point).
func latin1ToUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/4)
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// framesAsText reports whether a text's first line is an E2A frame, bare
// (NDJSON) or as an SSE data line.
func framesAsText(data []byte) bool {
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	line = bytes.TrimSpace(line)
	if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		line = bytes.TrimSpace(rest)
	}
	return len(line) > 0 && line[0] == '{' && checkJSON(line) == nil && isFrame(line)
}

// mediaType is ct's media type, lower case; any +json type but
// application/stream+json (lines of JSON) is application/json.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(mt, "+json") && mt != "application/stream+json" {
		return "application/json"
	}
	return mt
}

// withoutSecrets returns env, or a copy without the client's bearer token
// and header values should the normalizer have left any.
func withoutSecrets(env *e2a.Envelope) *e2a.Envelope {
	if env.Auth == nil || (env.Auth.BearerToken == "" && len(env.Auth.ExtraHeaders) == 0) {
		return env
	}
	c := env.Clone()
	c.Auth.BearerToken = ""
	c.Auth.ExtraHeaders = nil
	return c
}

// call is one upstream call's answer being written through.
type call struct {
	u   *Upstream
	ctx context.Context
	env *e2a.Envelope
	w   agent.Writer
	n   int // frames written
	// meta is the metadata member of the last frame written.
	meta json.RawMessage
	// closeDelimited: the answer's body ends when the connection closes
	// (no length, no chunks, HTTP/1.x, not decompressed), so an end
	// before the final frame may be a dropped connection. Any other
	// body's clean end is the agent's own.
	closeDelimited bool
}

// frameSource yields an answer's frames: io.EOF at its clean end,
// errTruncated when it ended inside a line or event.
type frameSource interface {
	next() ([]byte, error)
	// more reports whether anything but blank space was already received
	// after the last frame returned.
	more() bool
}

// stream writes the frames of src until the final one.
func (c *call) stream(src frameSource) error {
	for {
		data, err := src.next()
		if err != nil {
			return c.readError(err)
		}
		final, err := c.write(data)
		if err != nil {
			return err
		}
		if final {
			if src.more() {
				c.u.cfg.log.Warn("upstream wrote more after its final frame; ignored", "upstream", c.u.Name(),
					"request_id", c.env.RequestID, "frames", c.n)
			}
			return nil
		}
	}
}

// readError is the error a call ends with when its answer cannot be read
// further.
func (c *call) readError(err error) error {
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}
	switch {
	case (errors.Is(err, io.EOF) || errors.Is(err, errTruncated)) && !c.closeDelimited:
		// The agent ended its answer (its length reached, its last chunk
		// sent, its HTTP/2 stream ended): it will end it so again, and a
		// re-run repeats whatever it did. A cut is a transport error
		// (bridge.Classify: upstream_unavailable).
		where := "mid-stream: no final frame"
		if errors.Is(err, errTruncated) {
			where = "mid-frame"
		}
		return protocolError(ErrNoFinalFrame, "upstream ended its answer %s (frames before it: %d)", where, c.n)
	case errors.Is(err, io.EOF):
		return &bridge.Error{Code: bridge.CodeUnavailable, Retryable: true, Err: ErrNoFinalFrame,
			Message: fmt.Sprintf("upstream closed the answer mid-stream: no final frame, %d received", c.n)}
	case errors.Is(err, errTruncated):
		return &bridge.Error{Code: bridge.CodeUnavailable, Retryable: true, Err: ErrNoFinalFrame,
			Message: fmt.Sprintf("upstream closed the answer mid-frame (frames before it: %d)", c.n)}
	case errors.Is(err, ErrFrameTooLarge):
		return protocolError(ErrFrameTooLarge, "upstream frame %d is larger than %d bytes", c.n, c.u.cfg.maxFrameBytes)
	}
	return bridge.Classify(err)
}

// write writes one frame of the answer and reports whether it was final.
func (c *call) write(data []byte) (final bool, err error) {
	f, err := parseFrame(data, c.u.Scrub)
	if err != nil {
		return false, protocolError(ErrBadFrame, "upstream frame %d: %v", c.n, err)
	}
	if c.n >= c.u.cfg.maxFrames {
		return false, protocolError(ErrTooManyFrames, "upstream answer has more than %d frames", c.u.cfg.maxFrames)
	}
	return f.final, c.writeFrame(f)
}

// writeFrame writes f through the writer; a frame the writer finds
// invalid (spec §12.2, its kind's body) is the upstream's protocol error.
func (c *call) writeFrame(f frame) error {
	body, err := a2aBody(f.kind, f.body, c.env)
	if err != nil {
		return protocolError(ErrBadFrame, "upstream frame %d: %s", c.n, clip(err.Error(), c.u.Scrub))
	}
	f.body = body
	if !bytes.Equal(f.meta, c.meta) {
		var m map[string]any
		if len(f.meta) > 0 {
			if err := json.Unmarshal(f.meta, &m); err != nil {
				return protocolError(ErrBadFrame, "upstream frame %d: metadata: %v", c.n, err)
			}
		}
		if err := c.w.SetMetadata(m); err != nil {
			return err
		}
		c.meta = f.meta
	}
	c.n++
	err = c.w.Write(f.kind, f.status, f.body, f.final)
	if errors.Is(err, e2a.ErrInvalidResponse) {
		return protocolError(ErrBadFrame, "upstream frame %d: %v", c.n-1, err)
	}
	return err
}

// single writes a JSON answer: a final frame, or any other value as the
// request's result. A JSON value a close-delimited body (c.closeDelimited)
// cuts short, or before its first byte, is the connection dropped
// (upstream_unavailable, retryable, as a cut NDJSON line or SSE event),
// not the agent's bad answer.
func (c *call) single(body io.Reader) error {
	max := c.u.cfg.maxFrameBytes
	data, err := io.ReadAll(io.LimitReader(body, int64(max)+1))
	if err != nil {
		return c.readError(err)
	}
	if len(data) > max {
		return protocolError(ErrFrameTooLarge, "upstream JSON answer is larger than %d bytes", max)
	}
	data = bytes.TrimSpace(bytes.TrimPrefix(data, utf8BOM))
	if err := checkJSON(data); err != nil {
		switch {
		case c.closeDelimited && len(data) == 0:
			return c.readError(io.EOF)
		case c.closeDelimited && cutShort(data):
			return c.readError(errTruncated)
		}
		return protocolError(ErrBadFrame, "upstream JSON answer: %v", err)
	}
	if isFrame(data) {
		f, err := parseFrame(data, c.u.Scrub)
		if err != nil {
			return protocolError(ErrBadFrame, "upstream JSON answer: %v", err)
		}
		if !f.final {
			return protocolError(ErrBadFrame, "upstream JSON answer is a frame that is not final (%s)", f.kind)
		}
		return c.writeFrame(f)
	}
	c.n++
	return c.w.Complete(rawResult(data))
}

// protocolError is the not retryable upstream_protocol_error of cause.
func protocolError(cause error, format string, args ...any) *bridge.Error {
	e := bridge.Errorf(bridge.CodeProtocol, false, format, args...)
	e.Err = cause
	return e
}

// clip keeps a value from the upstream (a header, a frame's kind) short
// in a message: at most 100 characters, scrubbed (scrub, when not nil)
// before it is cut (bridge.Clip).
func clip(s string, scrub func(string) string) string { return bridge.Clip(s, 100, scrub) }

// cutShort reports whether data is the start of a JSON value that ends
// too soon (a value cut off), rather than one that is malformed.
func cutShort(data []byte) bool {
	var v json.RawMessage
	return errors.Is(json.NewDecoder(bytes.NewReader(data)).Decode(&v), io.ErrUnexpectedEOF)
}

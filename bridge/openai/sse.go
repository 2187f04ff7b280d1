package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/sse"
)

// sseReader reads server-sent events with a bound: a line, and the data of
// one event, may hold at most max bytes (a longer one is a protocol error,
// never an unbounded allocation). Its lines are sse.LineReader's (a
// leading byte order mark dropped; CRLF, LF or a lone CR end a line).
type sseReader struct {
	lines *sse.LineReader
	br    *bufio.Reader // what lines reads
	max   int
	// scrub (when set) takes the client's credentials out of a line an
	// error quotes, before it is cut (quote).
	scrub func(string) string
	// data is the array the events' data are gathered in, one after the
	// other (next).
	data []byte
}

// sseBufferSize is the read buffer of an sseReader: a chat completions
// chunk is well under it, a longer line is gathered apart. (It was 64 KiB:
// allocated and cleared for every call, it was an eighth of the bridge's CPU
// per request in `e2a bench --bridge openai`.)
const sseBufferSize = 4 << 10

func newSSEReader(r io.Reader, max int) *sseReader {
	if w, ok := r.(*wholeStream); ok && w.line > max {
		max = w.line // a whole answer, bounded when read (wholeAnswer)
	}
	br := bufio.NewReaderSize(r, min(max, sseBufferSize))
	return &sseReader{lines: sse.NewLineReader(br, max), br: br, max: max}
}

// eventAtHand reports whether the bytes already read from the upstream
// hold the end of an event (a blank line): next returns it without
// waiting for the network.
func (s *sseReader) eventAtHand() bool {
	n := s.br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := s.br.Peek(n)
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\r\n\r\n")) || bytes.Contains(b, []byte("\r\r"))
}

// doneAtHand reports whether the bytes already read from the upstream
// hold a whole [DONE] event (as servers write it: "data: [DONE]" then a
// blank line) that starts an event: read between events, next reaches it
// without waiting for the network.
func (s *sseReader) doneAtHand() bool {
	n := s.br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := s.br.Peek(n)
	const done = "data: [DONE]\n\n"
	return bytes.HasPrefix(b, []byte(done)) || bytes.Contains(b, []byte("\n\n"+done))
}

// errSSE reports an answer that is not an event stream (a line that is not
// an SSE field, or one too long).
var errSSE = errors.New("not a server-sent event stream")

// errCut reports a stream that ended inside a line which is not a whole
// SSE field (the upstream was cut off, not wrong).
var errCut = errors.New("the stream ended mid-line")

// readLine returns the next line (sse.LineReader.ReadLine), a line past
// the bound errSSE.
func (s *sseReader) readLine() (line []byte, last bool, err error) {
	line, last, err = s.lines.ReadLine()
	if errors.Is(err, sse.ErrLineTooLong) {
		return nil, false, fmt.Errorf("%w: a line longer than %d bytes", errSSE, s.max)
	}
	return line, last, err
}

// next returns the next event: its type ("" unless an event field named
// one), its data lines joined by line feeds, and whether the stream ended
// inside its last line (cut: the data may be incomplete). An "error" field
// (llama.cpp's) is an error event of that data. Comments, id and
// retry fields are skipped; an event without data, or whose data is empty
// or blank ("data:" alone, which some servers send as a keep-alive), is
// skipped, as httpagent's reader does. At the end of the stream it returns
// io.EOF (an event not ended by a blank line is returned first). Any other
// line is errSSE, or errCut when the stream ended inside it. The data is
// valid until the next call (the events share an array).
func (s *sseReader) next() (event string, data []byte, cut bool, err error) {
	var has bool
	data = s.data[:0]
	defer func() { s.data = data[:0] }()
	for {
		line, last, err := s.readLine()
		if errors.Is(err, io.EOF) && has && hasData(data) {
			return event, data, cut, nil
		}
		if err != nil {
			return "", nil, false, err
		}
		cut = last
		if len(line) == 0 {
			if has && hasData(data) {
				return event, data, false, nil
			}
			event, data, has = "", data[:0], false
			continue
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(name) {
		case "": // a comment (":" first), e.g. a keep-alive
		case "data":
			if has {
				data = append(data, '\n')
			}
			if len(data)+len(value) > s.max {
				return "", nil, false, fmt.Errorf("%w: an event larger than %d bytes", errSSE, s.max)
			}
			data, has = append(data, value...), true
		case "event":
			event = string(value)
		case "error":
			// llama.cpp's server reports a failure after its headers as an
			// "error: {...}" line (then "data: [DONE]"): an error event
			// whose data is that object, mapped by its code and type as
			// any error event's (an unknown field to SSE, so ignored by
			// clients, but the only word of the failure).
			event, data, has = "error", append(data[:0], value...), true
		case "id", "retry":
		default:
			if last {
				return "", nil, false, fmt.Errorf("%w: %s", errCut, quote(line, s.scrub))
			}
			return "", nil, false, fmt.Errorf("%w: line %s", errSSE, quote(line, s.scrub))
		}
	}
}

// hasData reports event data that is not empty or blank.
func hasData(data []byte) bool { return len(bytes.TrimSpace(data)) > 0 }

// quote is the start of an upstream's line, for an error message: at
// most 60 characters of it, scrubbed (scrub, when not nil) before it is
// cut (bridge.Clip).
func quote(b []byte, scrub func(string) string) string {
	return strconv.Quote(bridge.Clip(string(b), 60, scrub))
}

// streamBody is resp's body as an event stream, read through a buffer of
// size bytes. An answer typed text/event-stream is one. An answer of
// another type, or of none, is one when it starts as one (startsAsStream):
// the official clients (openai-python, openai-go's ssestream) read any
// answer to a streamed call as SSE whatever its type, and servers send
// SSE untyped (Starlette's StreamingResponse without a media type), as
// text/plain (a Go server that sets no type has it sniffed so) or as
// application/x-ndjson (LitServe's OpenAI spec until its issue #359). One
// that starts as a JSON object is read whole, at most max bytes
// (wholeAnswer): a completion as the stream that carries it, an error
// object as the upstream's error, one that a close-delimited body cuts
// short the connection's cut (retryable). What starts otherwise (an HTML page) is
// upstream_protocol_error.
func streamBody(ctx context.Context, resp *http.Response, size, max int, scrub func(string) string) (io.Reader, error) {
	mt := contentMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		return resp.Body, nil
	}
	br := bufio.NewReaderSize(resp.Body, size)
	ok, err := startsAsStream(br)
	if err != nil {
		return nil, readError(ctx, err)
	}
	if ok {
		return br, nil
	}
	if startsAsJSON(br) {
		r, err := wholeAnswer(br, max, bridge.CloseDelimited(resp), scrub)
		var be *bridge.Error
		if err != nil && !errors.As(err, &be) {
			return nil, readError(ctx, err)
		}
		return r, err
	}
	if (mt == "text/plain" || mt == "") && saysRateLimited(bodyStart(br, resp.ContentLength)) {
		// A rate limit said in words ("Too many requests, please slow
		// down") with status 200: mapped as a 429 is, retryable.
		return nil, bridge.Errorf(bridge.CodeRateLimited, true, "upstream error (answered with 200): %s",
			oneLine(bodyStart(br, resp.ContentLength), scrub))
	}
	return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered %q, not an event stream", mt)
}

// contentMediaType is the media type of a Content-Type value, as
// mime.ParseMediaType reads it (lower case; "" when it does not parse),
// without its allocations for an event stream's (what every streamed
// answer is typed).
func contentMediaType(ct string) string {
	const sse = "text/event-stream"
	if base, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(base) == sse {
		return sse
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt
}

// bodyStart is the start of an answer that is no event stream, for its
// words: what br already holds, or the whole body when its length is
// known and br holds it (never waiting for more of a body of unknown
// length).
func bodyStart(br *bufio.Reader, length int64) string {
	n := br.Buffered()
	if length > int64(n) && length <= int64(br.Size()) {
		n = int(length)
	}
	b, _ := br.Peek(n)
	return string(b)
}

// startsAsStream reports whether br's first bytes start an SSE field (data,
// event, id or retry) or a comment, after a byte order mark and blank
// lines; it reads no more of the body than it must to tell.
func startsAsStream(br *bufio.Reader) (bool, error) {
	for n := 1; n <= br.Size(); n++ {
		b, err := br.Peek(n)
		if len(b) < n {
			if errors.Is(err, io.EOF) {
				return sseStart(b) > 0, nil
			}
			return false, err
		}
		if v := sseStart(b); v != 0 {
			return v > 0, nil
		}
	}
	return false, nil
}

// sseFields are the names of the fields an event stream starts with.
var sseFields = [...][]byte{[]byte("data:"), []byte("event:"), []byte("id:"), []byte("retry:")}

// sseStart tells from b, the first bytes of a body, whether it starts as
// an event stream: 1 yes, -1 no, 0 not yet known (more bytes tell).
func sseStart(b []byte) int {
	const bom = "\ufeff"
	if len(b) < len(bom) && bytes.HasPrefix([]byte(bom), b) {
		return 0
	}
	b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte(bom)), "\r\n")
	if len(b) == 0 {
		return 0
	}
	if b[0] == ':' {
		return 1
	}
	for _, f := range sseFields {
		if bytes.HasPrefix(b, f) {
			return 1
		}
		if bytes.HasPrefix(f, b) {
			return 0
		}
	}
	return -1
}

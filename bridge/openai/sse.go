package openai

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/sse"
)

// sseReader reads server-sent events with a bound: a line, and the data of
// one event, may hold at most max bytes (a longer one is a protocol error,
// never an unbounded allocation). Its lines are sse.LineReader's (a
// leading byte order mark dropped; CRLF, LF or a lone CR end a line).
type sseReader struct {
	lines *sse.LineReader
	max   int
	// scrub (when set) takes the client's credentials out of a line an
	// error quotes, before it is cut (quote).
	scrub func(string) string
}

// sseBufferSize is the read buffer of an sseReader: a chat completions
// chunk is well under it, a longer line is gathered apart. (It was 64 KiB:
// allocated and cleared for every call, it was an eighth of the bridge's CPU
// per request in `e2a bench --bridge openai`.)
const sseBufferSize = 4 << 10

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{lines: sse.NewLineReader(bufio.NewReaderSize(r, min(max, sseBufferSize)), max), max: max}
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
// line is errSSE, or errCut when the stream ended inside it.
func (s *sseReader) next() (event string, data []byte, cut bool, err error) {
	var has bool
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

package httpagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sse"
)

// errTruncated: the answer ended inside a line or an event that does not
// parse (the upstream was cut off, not wrong).
var errTruncated = errors.New("httpagent: answer ended mid-frame")

// utf8BOM is the byte order mark an answer may start with (.NET's
// Encoding.UTF8 writes one through a StreamWriter): no part of its first
// frame, value or text (RFC 8259 §8.1 lets a JSON reader ignore it; the
// SSE reader drops it as the event-stream format does).
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// frame is what the bridge takes of an upstream frame.
type frame struct {
	kind, status string
	final        bool
	body         json.RawMessage
	// meta is the frame's metadata member, an object ("" when absent or
	// null): the writer's metadata from this frame on.
	meta json.RawMessage
}

// terminalKinds are the kinds whose is_final defaults to true.
var terminalKinds = map[string]bool{
	e2a.KindComplete: true, e2a.KindError: true, e2a.KindACPPromptRes: true, e2a.KindACPJSONRPCErr: true,
}

// checkJSON checks that data is one JSON value, valid UTF-8, nested at most
// e2a.MaxNesting deep.
func checkJSON(data []byte) error {
	switch {
	case len(data) == 0:
		return errors.New("empty")
	case !utf8.Valid(data):
		return errors.New("not valid UTF-8")
	case !json.Valid(data):
		return errors.New("not JSON")
	}
	return e2a.CheckDepth(data, e2a.MaxNesting)
}

// isFrame reports whether the JSON value data is an object with a
// response_kind member.
func isFrame(data []byte) bool {
	if data[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, ok := m["response_kind"]
	return ok
}

// parseFrame reads a frame (see the package documentation): its kind,
// body, and is_final and status with their defaults. The §12.2 rules and
// the body's are checked by the writer. scrub (the upstream's Scrubber,
// or nil) takes the credentials out of what an error quotes of data.
func parseFrame(data []byte, scrub func(string) string) (frame, error) {
	if err := checkJSON(data); err != nil {
		return frame{}, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return frame{}, errors.New("not a JSON object")
	}
	var f frame
	if err := str(m, "response_kind", &f.kind); err != nil {
		return frame{}, err
	}
	if f.kind == "" {
		return frame{}, errors.New("no response_kind")
	}
	if !e2a.IsResponseKind(f.kind) {
		return frame{}, fmt.Errorf("response_kind %q is unknown", clip(f.kind, scrub))
	}
	f.body = m["body"]
	if len(f.body) == 0 || f.body[0] != '{' {
		return frame{}, errors.New("body must be a JSON object")
	}
	if v := m["metadata"]; len(v) > 0 && string(v) != "null" {
		if v[0] != '{' {
			return frame{}, errors.New("metadata must be an object")
		}
		f.meta = v
	}
	f.final = terminalKinds[f.kind] || interrupts(f.kind, f.body)
	if v, ok := m["is_final"]; ok {
		if err := json.Unmarshal(v, &f.final); err != nil {
			return frame{}, errors.New("is_final must be true or false")
		}
	}
	if err := str(m, "status", &f.status); err != nil {
		return frame{}, err
	}
	if f.status == "" {
		switch {
		case f.kind == e2a.KindError || f.kind == e2a.KindACPJSONRPCErr:
			f.status = e2a.StatusFailed
		case f.final:
			f.status = e2a.StatusSucceeded
		default:
			f.status = e2a.StatusInProgress
		}
	}
	return f, nil
}

// interrupts reports whether a frame of kind with body ends the turn
// asking the client for something: an a2a.stream_event status_update or an
// a2a.task in state input-required or auth-required (e2a.Response.Interrupt,
// what every renderer reads), which A2A ends a turn with; its is_final
// defaults to true.
func interrupts(kind string, body json.RawMessage) bool {
	if kind != e2a.KindA2AStreamEvent && kind != e2a.KindA2ATask {
		return false
	}
	_, _, ok := (&e2a.Response{ResponseKind: kind, Body: body, IsFinal: true}).Interrupt()
	return ok
}

// str reads the string member key of m into dst ("" when absent or null).
func str(m map[string]json.RawMessage, key string, dst *string) error {
	v, ok := m[key]
	if !ok || string(v) == "null" {
		return nil
	}
	if json.Unmarshal(v, dst) != nil {
		return fmt.Errorf("%s must be a string", key)
	}
	return nil
}

// rawResult is a JSON answer as the result of e2a.complete.
func rawResult(data []byte) json.RawMessage { return json.RawMessage(data) }

// readLine returns lines' next line (sse.LineReader.ReadLine), a line
// past the bound ErrFrameTooLarge.
func readLine(lines *sse.LineReader) (line []byte, truncated bool, err error) {
	line, truncated, err = lines.ReadLine()
	if errors.Is(err, sse.ErrLineTooLong) {
		return nil, false, ErrFrameTooLarge
	}
	return line, truncated, err
}

// ndjsonReader yields the non-blank lines of an NDJSON answer: lines that
// LF ends (a JSON value may hold a CR as blank space).
type ndjsonReader struct {
	r     *bufio.Reader
	lines *sse.LineReader
	// started: a line was read (a byte order mark starts the first only).
	started bool
}

func newNDJSONReader(r *bufio.Reader, max int) *ndjsonReader {
	return &ndjsonReader{r: r, lines: sse.NewLFLineReader(r, max)}
}

func (n *ndjsonReader) next() ([]byte, error) {
	for {
		line, truncated, err := readLine(n.lines)
		if err != nil {
			return nil, err
		}
		if !n.started {
			n.started = true
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			if truncated {
				return nil, io.EOF
			}
			continue
		}
		if truncated && checkJSON(line) != nil {
			return nil, errTruncated
		}
		return line, nil
	}
}

func (n *ndjsonReader) more() bool { return buffered(n.r, nil) }

// buffered reports whether r's buffered bytes hold anything but blank
// space (and, with marker, contain it), without reading further.
func buffered(r *bufio.Reader, marker []byte) bool {
	b, _ := r.Peek(r.Buffered())
	if marker != nil {
		return bytes.Contains(b, marker)
	}
	return len(bytes.TrimSpace(b)) > 0
}

// sseReader yields the data of the events of an SSE answer. Its lines are
// sse.LineReader's (a leading byte order mark dropped; CRLF, LF or a lone
// CR end a line).
type sseReader struct {
	r     *bufio.Reader
	lines *sse.LineReader
	max   int
	data  []byte
	has   bool // a data line was seen for the current event
}

func newSSEReader(r *bufio.Reader, max int) *sseReader {
	return &sseReader{r: r, lines: sse.NewLineReader(r, max+len("data: ")), max: max}
}

func (s *sseReader) next() ([]byte, error) {
	s.data, s.has = s.data[:0], false
	for {
		line, truncated, err := readLine(s.lines)
		if errors.Is(err, io.EOF) && s.has {
			// The answer ended without the event's blank line: dispatch
			// it if it is whole.
			if checkJSON(bytes.TrimSpace(s.data)) != nil {
				return nil, errTruncated
			}
			return s.data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if s.has && len(bytes.TrimSpace(s.data)) > 0 {
				return s.data, nil
			}
			s.data, s.has = s.data[:0], false
			continue
		}
		if value, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			value = bytes.TrimPrefix(value, []byte{' '})
			if s.has {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > s.max {
				return nil, ErrFrameTooLarge
			}
			s.data, s.has = append(s.data, value...), true
		}
		// event:, id:, retry: and comments are ignored.
		if truncated {
			if s.has && checkJSON(bytes.TrimSpace(s.data)) == nil {
				return s.data, nil
			}
			return nil, errTruncated
		}
	}
}

func (s *sseReader) more() bool { return buffered(s.r, []byte("data:")) }

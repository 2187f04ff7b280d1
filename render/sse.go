package render

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CompactLine returns raw JSON on one line: raw itself when it holds no
// line break (the common case: frames are written compact), a compacted
// copy otherwise; bytes that are not JSON with their line breaks removed.
func CompactLine(raw []byte) []byte {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		// Not JSON: keep it on one line anyway.
		return bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r"), nil), []byte("\n"), []byte(" "))
	}
	return b.Bytes()
}

// sse writes Server-Sent Events.
type sse struct{ o *Output }

func (s sse) head(retry time.Duration) {
	h := s.o.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.o.WriteHeader(http.StatusOK)
	if retry > 0 {
		s.o.WriteString("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n")
	}
}

func (s sse) comment(text string) error {
	_, err := s.o.WriteString(": " + text + "\n\n")
	return err
}

// event writes one event; id and event are omitted when empty. data must be
// one line of JSON. A line break in id or event (an E2A event is named
// after the frame's response_kind, which an integrator may write with
// "\n" escapes) is written as a space: it would end the field and let the
// frame write fields and events of its own into the stream.
func (s sse) event(id, event string, data []byte) error {
	id, event = sseField(id), sseField(event)
	buf := s.o.scratchBuf(len(data) + len(id) + len(event) + 24)
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	if event != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, event...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, CompactLine(data)...)
	buf = append(buf, "\n\n"...)
	_, err := s.o.Write(buf)
	s.o.reuse(buf)
	return err
}

// sseField returns v with its line breaks (CR, LF) as spaces.
func sseField(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, v)
}

func (s sse) eventJSON(id, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.event(id, event, b)
}

// SSEHead writes the head of an SSE response: 200, text/event-stream, no
// caching or proxy buffering, and the retry interval when retry > 0.
func SSEHead(o *Output, retry time.Duration) { sse{o}.head(retry) }

// SSEComment writes an SSE comment (": text").
func SSEComment(o *Output, text string) error { return sse{o}.comment(text) }

// SSEEvent writes one SSE event; id and event are omitted when empty, data
// is one line of JSON.
func SSEEvent(o *Output, id, event string, data []byte) error { return sse{o}.event(id, event, data) }

// SSEEventJSON writes one SSE event whose data is v in JSON.
func SSEEventJSON(o *Output, id, event string, v any) error { return sse{o}.eventJSON(id, event, v) }

// SSEEndEvent writes a stream's last event, v in JSON (its error), opening
// the SSE response first when nothing was written yet: what a renderer's
// End writes for a stream that failed before or after it started.
func SSEEndEvent(o *Output, event string, v any) error {
	if !o.Started() {
		SSEHead(o, 0)
	}
	return SSEEventJSON(o, "", event, v)
}

// WriteLine writes b, one JSON value, as one compact line (an NDJSON
// record).
func WriteLine(o *Output, b []byte) error { return writeLine(o, b) }

// NDJSONHead writes the head of an NDJSON response: 200,
// application/x-ndjson, no caching or proxy buffering.
func NDJSONHead(o *Output) {
	h := o.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.WriteHeader(http.StatusOK)
}

func writeLine(o *Output, b []byte) error {
	b = CompactLine(b)
	buf := o.scratchBuf(len(b) + 1)
	buf = append(append(buf, b...), '\n')
	_, err := o.Write(buf)
	o.reuse(buf)
	return err
}

// WriteLineJSON writes v as one compact JSON line (an NDJSON record).
func WriteLineJSON(o *Output, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeLine(o, b)
}

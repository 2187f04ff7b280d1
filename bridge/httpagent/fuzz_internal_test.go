package httpagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// Small bounds, so that the fuzzer reaches them: a frame of at most
// fuzzMaxBytes, an answer of at most fuzzMaxFrames, read through a
// buffer smaller than a frame (bufio's minimum, 16 bytes).
const (
	fuzzMaxBytes  = 200
	fuzzMaxFrames = 6
	fuzzBufSize   = 16
)

// fuzzCall is a call of an upstream with the fuzz bounds.
func fuzzCall(w agent.Writer) *call {
	// A client as New gets one: an answer of an unknown kind is scrubbed
	// with its credentials (the harness had none: a nil-pointer panic).
	c, err := bridge.NewClient("http://upstream.test/")
	if err != nil {
		panic(err)
	}
	u := &Upstream{c: c, url: "http://upstream.test/", cfg: config{maxFrameBytes: fuzzMaxBytes, maxFrames: fuzzMaxFrames,
		log: slog.New(slog.DiscardHandler)}}
	return &call{u: u, ctx: context.Background(), env: &e2a.Envelope{RequestID: "q"}, w: w}
}

// Answer formats of FuzzAnswer.
const (
	formatNDJSON = iota
	formatSSE
	formatJSON
	formatText
	formats
)

// FuzzAnswer: whatever an HTTP agent answers, as NDJSON, SSE, one JSON
// value or a text, the call ends with nil after exactly one final frame, or with a
// bridge.Error whose code and retryable flag are its cause's (a frame that
// is not one, too large or too many: upstream_protocol_error, not
// retryable; an answer ending before its final frame: upstream_unavailable,
// retryable, when its body is delimited by the connection's close, else
// upstream_protocol_error, not retryable), never a panic, a frame past the bounds or a frame after the
// final one. An NDJSON answer is also read by a plain line splitter, which
// must take the same frames and end the same way.
func FuzzAnswer(f *testing.F) {
	chunk := `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"hi"}}`
	done := `{"response_kind":"e2a.complete","body":{"result":"ok"}}`
	f.Add([]byte(chunk+"\n\n"+chunk+"\r\n"+done+"\n"), uint8(formatNDJSON))
	f.Add([]byte(chunk+"\n"+done), uint8(formatNDJSON))
	f.Add([]byte(chunk+"\n"+`{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"`), uint8(formatNDJSON))
	f.Add([]byte("event: x\ndata: "+chunk+"\n\ndata: {\"response_kind\":\ndata: \"e2a.complete\",\"body\":{}}\n\n"), uint8(formatSSE))
	f.Add([]byte(`{"answer":42}`), uint8(formatJSON))
	f.Add([]byte("héllo\r\n"), uint8(formatText))
	f.Add([]byte("data: "+done+"\n\n"), uint8(formatText))
	f.Add([]byte("\ufeff"+chunk+"\n"+done), uint8(formatNDJSON))
	f.Add([]byte("\ufeff \"ok\"\r\n"), uint8(formatJSON))
	f.Add([]byte("\ufeff\n"), uint8(formatText))
	f.Fuzz(func(t *testing.T, body []byte, format uint8) {
		w := &agenttest.Writer{}
		c := fuzzCall(w)
		c.closeDelimited = len(body)%2 == 0 // either framing
		br := bufio.NewReaderSize(bytes.NewReader(body), fuzzBufSize)
		var err error
		switch format % formats {
		case formatNDJSON:
			err = c.stream(newNDJSONReader(br, fuzzMaxBytes))
			wantKinds, wantErr := splitNDJSON(body)
			same := (err == nil) == (wantErr == nil) && (wantErr == nil || errors.Is(err, wantErr))
			if !slices.Equal(w.Kinds(), wantKinds) || !same {
				t.Fatalf("NDJSON: frames %q, %v; a line splitter: %q, %v", w.Kinds(), err, wantKinds, wantErr)
			}
		case formatSSE:
			err = c.stream(newSSEReader(br, fuzzMaxBytes))
		case formatJSON:
			err = c.single(bytes.NewReader(body))
		case formatText:
			err = c.text(bytes.NewReader(body), "text/plain; charset=UTF-8")
			text := bytes.TrimRight(bytes.TrimPrefix(body, utf8BOM), "\r\n")
			if ok := len(body) <= fuzzMaxBytes && len(text) > 0 && utf8.Valid(text) && !framesAsText(text); ok != (err == nil) {
				t.Fatalf("text %q: %v", body, err)
			}
		}
		checkAnswer(t, w, err, c.closeDelimited)
	})
}

// checkAnswer checks what FuzzAnswer promises of every answer.
func checkAnswer(t *testing.T, w *agenttest.Writer, err error, closeDelimited bool) {
	t.Helper()
	if w.AfterFinal() > 0 || len(w.Kinds()) > fuzzMaxFrames {
		t.Fatalf("frames %q: %d after the final one (bound %d)", w.Kinds(), w.AfterFinal(), fuzzMaxFrames)
	}
	if err == nil {
		if !w.Final() {
			t.Fatalf("nil error without a final frame: %q", w.Kinds())
		}
		return
	}
	var be *bridge.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v is not a bridge.Error", err)
	}
	switch {
	case errors.Is(err, ErrNoFinalFrame) && closeDelimited:
		if be.Code != bridge.CodeUnavailable || !be.Retryable {
			t.Fatalf("%v: code %s retryable %v", err, be.Code, be.Retryable)
		}
	case errors.Is(err, ErrNoFinalFrame):
		if be.Code != bridge.CodeProtocol || be.Retryable {
			t.Fatalf("%v: code %s retryable %v", err, be.Code, be.Retryable)
		}
	case errors.Is(err, ErrBadFrame), errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrTooManyFrames), errors.Is(err, ErrContentType):
		if be.Code != bridge.CodeProtocol || be.Retryable {
			t.Fatalf("%v: code %s retryable %v", err, be.Code, be.Retryable)
		}
	default:
		t.Fatalf("error %v has no documented cause", err)
	}
}

// splitNDJSON is the reference reading of an NDJSON answer, line by line
// with bytes.Split: the kinds of the frames it writes and the sentinel it
// ends with (nil after a final frame).
func splitNDJSON(body []byte) (kinds []string, err error) {
	lines := bytes.Split(body, []byte{'\n'})
	for i, line := range lines {
		last := i == len(lines)-1 // no line feed after it: the answer ended there
		if len(bytes.TrimSuffix(line, []byte{'\r'})) > fuzzMaxBytes {
			return kinds, ErrFrameTooLarge
		}
		if i == 0 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if last && checkJSON(line) != nil {
			return kinds, ErrNoFinalFrame // cut off mid-frame
		}
		fr, perr := parseFrame(line, nil)
		if perr != nil {
			return kinds, ErrBadFrame
		}
		if len(kinds) == fuzzMaxFrames {
			return kinds, ErrTooManyFrames
		}
		if !validFrame(fr) {
			return kinds, ErrBadFrame
		}
		kinds = append(kinds, fr.kind)
		if fr.final {
			return kinds, nil
		}
	}
	return kinds, ErrNoFinalFrame
}

// validFrame reports whether the bridge writes fr: its metadata decodes
// and the runtime's checks take it.
func validFrame(fr frame) bool {
	var m map[string]any
	if len(fr.meta) > 0 && json.Unmarshal(fr.meta, &m) != nil {
		return false
	}
	var w agenttest.Writer
	return w.Write(fr.kind, fr.status, fr.body, fr.final) == nil
}

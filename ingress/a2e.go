package ingress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// MaxA2ELines bounds the messages of one POST /a2e body.
const MaxA2ELines = 64

// a2eWriter is the one NDJSON answer of a POST /a2e: every message's answer
// (local replies, then egress's invoke/event lines and response) goes to it
// in order; the header is written once.
type a2eWriter struct {
	http.ResponseWriter
	mu      sync.Mutex
	started bool
}

func (w *a2eWriter) WriteHeader(code int) {
	if w.started {
		return
	}
	w.started = true
	w.ResponseWriter.Header().Set("Content-Type", "application/x-ndjson")
	w.ResponseWriter.WriteHeader(code)
}

func (w *a2eWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *a2eWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *a2eWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// line writes one A2E message as a compact JSON line.
func (w *a2eWriter) line(m egress.A2EMessage) {
	b, _ := json.Marshal(m)
	_, _ = w.Write(append(b, '\n'))
	w.Flush()
}

func a2eMsg(typ, reqID string) egress.A2EMessage {
	now := time.Now()
	return egress.A2EMessage{A2E: egress.A2EVersion, Version: egress.A2EVersion, ID: strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", ""),
		Type: typ, TS: float64(now.UnixMicro()) / 1e6, ReqID: reqID}
}

func a2eError(reqID, code, msg string, retryable bool, detail map[string]any) egress.A2EMessage {
	m := a2eMsg("error", reqID)
	m.Code, m.Message, m.Detail, m.Retryable = code, msg, detail, &retryable
	return m
}

// a2eShape writes a refusal as one A2E error line with the HTTP status.
func a2eShape(w http.ResponseWriter, f failure) {
	aw := &a2eWriter{ResponseWriter: w}
	aw.WriteHeader(f.Status)
	detail := map[string]any{"http_status": f.Status}
	if f.Data != nil {
		detail["limit"] = f.Data
	}
	aw.line(a2eError("", f.Code, f.Message, f.Retryable, detail))
}

// handleA2E serves POST /a2e: an NDJSON body of A2E messages answered as
// one NDJSON stream, message by message in order. handshake/req →
// handshake/resp, ping → pong, shutdown ends the answer; any other type is
// a request: published to its pool, then its invoke/event lines and the
// response (or error, with retryable) are streamed before the next message
// is read. A malformed line gets an error line and the others still run;
// a body that is not valid UTF-8 is refused whole (400, parse_error).
func (s *Server) handleA2E(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w}
	defer func() { s.metrics.requests.WithLabelValues("a2e", "POST /a2e", strconv.Itoa(rec.code)).Inc() }()
	p, ok := s.gate(rec, r, "a2e", a2eShape)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(rec, r.Body, s.opts.maxBody)
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		a2eShape(rec, failure{Status: http.StatusRequestEntityTooLarge, Code: normalizer.A2ECodeInvalidRequest,
			Message: "body exceeds " + strconv.FormatInt(s.opts.maxBody, 10) + " bytes"})
		return
	}
	if !utf8.Valid(body.Bytes()) {
		// Refused whole, before any line runs: encoding/json would replace
		// the bad bytes with U+FFFD.
		a2eShape(rec, failure{Status: http.StatusBadRequest, Code: normalizer.A2ECodeParseError,
			Message: "the body is not valid UTF-8"})
		return
	}
	aw := &a2eWriter{ResponseWriter: rec}
	sc := bufio.NewScanner(&body)
	sc.Buffer(make([]byte, 0, 64<<10), int(s.opts.maxBody)+1)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if n++; n > MaxA2ELines {
			aw.line(a2eError("", normalizer.A2ECodeInvalidRequest, "more than "+strconv.Itoa(MaxA2ELines)+" messages in one body", false, nil))
			return
		}
		if !s.a2eMessage(aw, r, p, line) {
			return
		}
	}
	if !aw.started {
		aw.line(a2eError("", normalizer.A2ECodeInvalidRequest, "empty body: send one A2E message per line", false, nil))
	}
}

// a2eMessage answers one message; it returns false when the answer ends
// (shutdown, client gone).
func (s *Server) a2eMessage(aw *a2eWriter, r *http.Request, p Principal, line []byte) bool {
	res, err := s.opts.norm.FromA2E(s.input(r, line, p, r.URL.Query().Get("agent")))
	if err != nil {
		reqID := ""
		if ne, ok := err.(*normalizer.Error); ok {
			reqID = ne.ReqID
		}
		aw.line(a2eError(reqID, normalizer.A2ECode(err), err.Error(), false, nil))
		return true
	}
	env := res.Envelope
	reqID := env.CorrelationID
	if reqID == "" {
		reqID = env.MessageID
	}
	if res.Op == normalizer.OpLocal {
		switch env.Method {
		case "handshake/req":
			m := a2eMsg("handshake/resp", reqID)
			m.Result = map[string]any{"accepted": true, "server": "e2a-pipeline", "version": Version,
				"types": s.opts.a2eTypes.Types()}
			aw.line(m)
		case "ping":
			aw.line(a2eMsg("pong", reqID))
		case "shutdown":
			return false
		default:
			// pong, handshake/resp, invoke/event, error from a client:
			// nothing to answer.
		}
		return true
	}
	start := time.Now()
	acc, err := s.publish(r.Context(), p, res.Pool, env)
	s.metrics.publish.Observe(time.Since(start).Seconds())
	if errors.Is(err, ErrUnknownPool) {
		aw.line(a2eError(reqID, "unknown_agent", err.Error(), false, nil))
		return r.Context().Err() == nil
	}
	if errors.Is(err, ErrConflict) {
		aw.line(a2eError(reqID, "conflict", "the request id (Idempotency-Key) is already in use; choose another", false, nil))
		return r.Context().Err() == nil
	}
	if errors.Is(err, ErrTooLarge) {
		aw.line(a2eError(reqID, "body_too_large", err.Error(), false, map[string]any{"http_status": http.StatusRequestEntityTooLarge}))
		return r.Context().Err() == nil
	}
	if err != nil {
		aw.line(a2eError(reqID, "unavailable", "the pipeline could not accept the request; retry later", true, nil))
		return r.Context().Err() == nil
	}
	s.egress.Serve(aw, r, acc.RequestID, egress.FormatA2ENDJSON, func(o *egress.Output) egress.Renderer {
		return egress.NewA2E(o, egress.A2EParams{ReqID: reqID, ReqType: env.Method})
	})
	return r.Context().Err() == nil
}

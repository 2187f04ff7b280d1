package a2aupstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SetFault changes how the server misbehaves from the next call on
// (Fault{} serves every call again).
func (s *Server) SetFault(f Fault) error {
	if err := f.validate(s.opts.Binding); err != nil {
		return err
	}
	s.setFault(f)
	return nil
}

func (s *Server) setFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.left = f, f.Times
	if f.Times == 0 {
		s.left = -1
	}
}

// Faulted returns how many calls a fault answered.
func (s *Server) Faulted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faulted
}

// takeFault returns the fault that answers the next call, if any.
func (s *Server) takeFault(card bool) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault
	if f.Kind == NoFault || s.left == 0 || (card && !f.OnCard) {
		return Fault{}, false
	}
	if s.left > 0 {
		s.left--
	}
	s.faulted++
	return f, true
}

func (s *Server) faulty(next http.Handler) http.Handler { return s.faultHTTP(next, false) }

func (s *Server) faultyCard(next http.Handler) http.Handler { return s.faultHTTP(next, true) }

func (s *Server) faultHTTP(next http.Handler, card bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := s.takeFault(card)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		switch f.Kind {
		case FaultStatus:
			if f.RetryAfter != "" {
				w.Header().Set("Retry-After", f.RetryAfter)
			}
			http.Error(w, http.StatusText(f.Status), f.Status)
		case FaultHang:
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-s.closing:
			}
		case FaultGarbage:
			_, _ = io.Copy(io.Discard, r.Body)
			if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: {\"jsonrpc\": \"2.0\", this is not json\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "<html>this is not json{")
		case FaultCloseMidEvent:
			next.ServeHTTP(&cutWriter{ResponseWriter: w, after: f.cutAfter()}, r)
		}
	})
}

var errCut = errors.New("a2aupstream: connection cut by the fault")

var (
	_ http.Flusher      = (*cutWriter)(nil)
	_ grpc.ServerStream = (*cutStream)(nil)
)

// cutWriter passes an answer through until the middle of the server-sent
// event after its first after ones (of its body, when it is not an event
// stream), writes half of what comes then, and drops the connection.
type cutWriter struct {
	http.ResponseWriter
	after  int  // complete events to pass through
	events int  // complete events passed through
	cut    bool // the connection was dropped
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	keep := 0 // bytes of p that pass whole
	if strings.HasPrefix(c.Header().Get("Content-Type"), "text/event-stream") {
		for c.events < c.after {
			i := bytes.Index(p[keep:], []byte("\n\n"))
			if i < 0 {
				return c.ResponseWriter.Write(p)
			}
			keep += i + 2
			c.events++
			if keep == len(p) {
				return c.ResponseWriter.Write(p)
			}
		}
	}
	cut := keep + (len(p)-keep+1)/2
	_, _ = c.ResponseWriter.Write(p[:cut])
	rc := http.NewResponseController(c.ResponseWriter)
	_ = rc.Flush()
	if conn, _, err := rc.Hijack(); err == nil {
		_ = conn.Close()
	}
	c.cut = true
	return cut, errCut
}

// Flush lets the handler flush what passes through.
func (c *cutWriter) Flush() {
	if !c.cut {
		_ = http.NewResponseController(c.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// grpcCode is the gRPC code an HTTP error status stands for.
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	if httpStatus >= 500 {
		return codes.Internal
	}
	return codes.InvalidArgument
}

// grpcFault is the error a fault answers a gRPC call with before it runs
// (nil for FaultCloseMidEvent on a stream, which runs the call).
func (s *Server) grpcFault(ctx context.Context, f Fault) error {
	switch f.Kind {
	case FaultStatus:
		return status.Error(grpcCode(f.Status), http.StatusText(f.Status))
	case FaultHang:
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closing:
			return status.Error(codes.Unavailable, errClosed.Error())
		}
	}
	return status.Error(codes.Unavailable, errCut.Error())
}

func (s *Server) faultUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if f, ok := s.takeFault(false); ok {
		return nil, s.grpcFault(ctx, f)
	}
	return next(ctx, req)
}

func (s *Server) faultStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	f, ok := s.takeFault(false)
	if !ok {
		return next(srv, ss)
	}
	if f.Kind != FaultCloseMidEvent {
		return s.grpcFault(ss.Context(), f)
	}
	cs := &cutStream{ServerStream: ss, after: f.cutAfter()}
	err := next(srv, cs)
	if cs.cut {
		return status.Error(codes.Unavailable, errCut.Error())
	}
	return err
}

// cutStream lets after messages through, then fails every send.
type cutStream struct {
	grpc.ServerStream
	after int
	sent  int
	cut   bool
}

func (c *cutStream) SendMsg(m any) error {
	if c.sent >= c.after {
		c.cut = true
		return errCut
	}
	c.sent++
	return c.ServerStream.SendMsg(m)
}

// slogLogger routes net/http's server errors to the options' logger.
func slogLogger(o Options) *log.Logger {
	return slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)
}

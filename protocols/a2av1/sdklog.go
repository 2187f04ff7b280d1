package a2av1

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

	a2alog "github.com/a2aproject/a2a-go/v2/log"
)

// sdkLogger is the logger a2a-go's handlers log with on the bindings'
// calls (its log package reads it from the call's context): the host's
// (its Logger method, when it has one; else slog's default), with what
// the SDK logs at Error after one of its writes to the client failed
// ("failed to write an event", "failed to write keep-alive", "failed to
// encode response": a client gone, or one cut as too slow by
// egress.CutSlow) at Debug. Such a failure is the client's, not the
// pipeline's, and egress counts it
// (e2a_egress_slow_client_disconnects_total); at Error, every client that
// closed a SubscribeToTask stream was a line an operator is paged for.
func sdkLogger(h Host) *slog.Logger {
	base := slog.Default()
	if l, ok := h.(interface{ Logger() *slog.Logger }); ok && l.Logger() != nil {
		base = l.Logger()
	}
	return slog.New(clientWriteLog{base.Handler()})
}

// clientWrites is a writer of an SDK-written answer that remembers whether
// a write to the client failed.
type clientWrites struct {
	http.ResponseWriter
	rc     *http.ResponseController
	failed atomic.Bool
}

func (w *clientWrites) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed.Store(true)
	}
	return n, err
}

// Flush flushes; a flush that fails is remembered as a failed write (the
// SDK's SSE writer asserts http.Flusher and sees no error).
func (w *clientWrites) Flush() {
	if w.rc.Flush() != nil {
		w.failed.Store(true)
	}
}

// Unwrap is for http.ResponseController.
func (w *clientWrites) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type clientWritesKey struct{}

// withSDKLog returns w and r for the SDK's handler: w remembering a failed
// write, r's context carrying it and logger.
func withSDKLog(w http.ResponseWriter, r *http.Request, logger *slog.Logger) (*clientWrites, *http.Request) {
	cw := &clientWrites{ResponseWriter: w, rc: http.NewResponseController(w)}
	ctx := context.WithValue(a2alog.AttachLogger(r.Context(), logger), clientWritesKey{}, cw)
	return cw, r.WithContext(ctx)
}

// clientWriteLog is sdkLogger's handler: an Error record of a call whose
// write to the client failed is passed on at Debug.
type clientWriteLog struct{ slog.Handler }

func (h clientWriteLog) Handle(ctx context.Context, r slog.Record) error {
	if cw, ok := ctx.Value(clientWritesKey{}).(*clientWrites); ok && r.Level == slog.LevelError && cw.failed.Load() {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h clientWriteLog) WithAttrs(as []slog.Attr) slog.Handler {
	return clientWriteLog{h.Handler.WithAttrs(as)}
}

func (h clientWriteLog) WithGroup(name string) slog.Handler {
	return clientWriteLog{h.Handler.WithGroup(name)}
}

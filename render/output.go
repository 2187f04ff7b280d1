package render

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"time"
)

// Output is the response a renderer writes to: an http.ResponseWriter with
// a write deadline (a client that stops reading is cut off after the write
// timeout instead of holding the reader forever) and a record of whether
// the head was written.
type Output struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	armed   time.Time
	started bool
	pending bool // written since the last flush
	// endsResponse: the HTTP handler returns when the stream ends, so a
	// completed stream's end is left to net/http, which sends it with the
	// response's last chunk in one write (SetEndsResponse).
	endsResponse bool
	// headHeld: the head waits for the first frame (HoldHead).
	headHeld bool
	err      error
	// scratch is reused to assemble what one Write sends (an event, a
	// line): net/http copies what it is given, so the next can reuse it.
	scratch []byte
}

// scratchBuf returns an empty buffer with room for n bytes, to assemble what
// the next Write sends; hand it back with reuse after that Write. It saves an
// allocation per event on a long stream. The buffer is o's: one Write at a
// time, from the goroutine writing the response.
func (o *Output) scratchBuf(n int) []byte {
	b := o.scratch[:0]
	o.scratch = nil
	if cap(b) < n {
		return make([]byte, 0, max(n, 2*cap(b)))
	}
	return b
}

// reuse hands a buffer from scratchBuf back once it was written. Buffers
// that grew beyond MaxScratch are dropped (one large event keeps no memory).
func (o *Output) reuse(b []byte) {
	if cap(b) <= MaxScratch {
		o.scratch = b[:0]
	}
}

// MaxScratch bounds the buffer a renderer or an Output keeps between the
// events it writes (larger ones are not kept).
const MaxScratch = 64 << 10

// KeepScratch is what a renderer keeps of b, a buffer it assembled an
// event in once the event is written: b emptied, or nil when it grew
// beyond MaxScratch.
func KeepScratch(b []byte) []byte {
	if cap(b) <= MaxScratch {
		return b[:0]
	}
	return nil
}

// NewOutput wraps w. writeTimeout bounds every write and flush (0: none).
func NewOutput(w http.ResponseWriter, writeTimeout time.Duration) *Output {
	return &Output{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
}

// Header returns the response headers.
func (o *Output) Header() http.Header { return o.w.Header() }

// Started reports whether the status line was written.
func (o *Output) Started() bool { return o.started }

// WriteHeader writes the status line once.
func (o *Output) WriteHeader(code int) {
	if o.started {
		return
	}
	o.started = true
	o.pending = true
	o.w.WriteHeader(code)
}

func (o *Output) arm() {
	if o.timeout <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(o.armed) < o.timeout/4 {
		return
	}
	o.armed = now
	_ = o.rc.SetWriteDeadline(now.Add(o.timeout))
}

// Write writes p to the response (status 200 if none was written).
func (o *Output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if !o.started {
		o.WriteHeader(http.StatusOK)
	}
	o.arm()
	o.pending = true
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
	}
	return n, err
}

// WriteString writes s.
func (o *Output) WriteString(s string) (int, error) { return o.Write([]byte(s)) }

// Flush sends what is buffered to the client.
func (o *Output) Flush() error {
	if o.err != nil {
		return o.err
	}
	if !o.started {
		// net/http would send an implicit 200; record it.
		o.WriteHeader(http.StatusOK)
	}
	o.arm()
	o.pending = false
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.err = err
		return err
	}
	return nil
}

// flushPending flushes what was written since the last flush, if anything.
func (o *Output) flushPending() error {
	if !o.pending {
		return o.err
	}
	return o.Flush()
}

// BeforeWait is called by the reader driving the output whenever it has
// nothing to deliver and is about to wait: it flushes what is pending,
// unless the head is held for the first frame (HoldHead), so that frames
// that arrive together go out in one write.
func (o *Output) BeforeWait() error {
	if o.headHeld {
		return nil
	}
	return o.flushPending()
}

// HeadHoldOver sends the held head: the first frame is late.
func (o *Output) HeadHoldOver() error {
	o.headHeld = false
	return o.flushPending()
}

// HoldHead holds (or stops holding) what is written, head included, until
// the first frame: BeforeWait does not flush it.
func (o *Output) HoldHead(hold bool) { o.headHeld = hold }

// SetEndsResponse records that the HTTP handler returns when the stream
// ends: a completed stream's end is left to net/http, which sends it with
// the response's last chunk in one write (the driver does not flush it).
func (o *Output) SetEndsResponse() { o.endsResponse = true }

// EndsResponse reports whether SetEndsResponse was called.
func (o *Output) EndsResponse() bool { return o.endsResponse }

// Err returns the first write error.
func (o *Output) Err() error { return o.err }

// SlowClient reports whether the write error is the write deadline
// passing: the client stopped reading.
func (o *Output) SlowClient() bool { return o.err != nil && errors.Is(o.err, os.ErrDeadlineExceeded) }

// WriteJSON writes v as a complete JSON response with status.
func (o *Output) WriteJSON(status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o.Header().Set("Content-Type", "application/json")
	o.WriteHeader(status)
	b = append(b, '\n')
	_, err = o.Write(b)
	return err
}

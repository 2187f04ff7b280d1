package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrLineTooLong reports a line longer than the reader's bound.
var ErrLineTooLong = errors.New("sse: line too long")

// bom is the UTF-8 byte order mark an event stream may start with.
var bom = []byte{0xEF, 0xBB, 0xBF}

// LineReader reads lines, each of at most max bytes without its line end,
// from a bufio.Reader (whose buffer it reads in place: a line longer than
// the buffer is gathered in its own).
type LineReader struct {
	r   *bufio.Reader
	max int
	buf []byte // the line being read, when longer than r's buffer
	// lf: only LF ends a line (a CR before it is dropped); otherwise CRLF,
	// LF or a lone CR do.
	lf bool
	// bom: a byte order mark may still start the stream.
	bom bool
	// cr: the last line ended with a CR that ended r's buffered bytes: an
	// LF after it is part of that line end (CRLF split across reads).
	cr bool
}

// NewLineReader reads the lines of an event stream from r (WHATWG HTML
// §9.2.5 and §9.2.6): a line ends with CRLF, LF or a lone CR, and a UTF-8
// byte order mark at the start of the stream is dropped.
func NewLineReader(r *bufio.Reader, max int) *LineReader {
	return &LineReader{r: r, max: max, bom: true}
}

// NewLFLineReader reads lines ended by LF (or CRLF) from r, such as
// NDJSON's, whose values may hold a CR as blank space.
func NewLFLineReader(r *bufio.Reader, max int) *LineReader {
	return &LineReader{r: r, max: max, lf: true}
}

// ReadLine returns the next line without its line end: ErrLineTooLong
// past the bound (a last line included), any other error of the reader as
// is. At the end of the stream it returns io.EOF, after a last line without
// a line end if there is one, with last set (the stream may have been cut
// in that line). The line is valid until the next call.
func (l *LineReader) ReadLine() (line []byte, last bool, err error) {
	l.buf = l.buf[:0]
	from := 0 // the buffered bytes already searched for a line end
	for {
		b, _ := l.r.Peek(l.r.Buffered())
		if skip := l.skip(b); skip > 0 {
			_, _ = l.r.Discard(skip)
			from = 0
			continue
		}
		if i := l.lineEnd(b, from); i >= 0 {
			return l.cut(b, i)
		}
		// While a byte order mark may still start the stream, b is a
		// part of one (at most 2 bytes): not yet a line to bound.
		if !l.bom && len(l.buf)+len(b) > l.max+l.slack() {
			return nil, false, ErrLineTooLong
		}
		if len(b) == l.r.Size() { // the buffer is full: the line goes on
			l.buf = append(l.buf, b...)
			_, _ = l.r.Discard(len(b))
			from = 0
			continue
		}
		from = len(b)
		if _, err := l.r.Peek(len(b) + 1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return l.end(err)
		}
	}
}

// skip is how many bytes at the start of b are no line's: a byte order
// mark starting the stream, or an LF after a CR that ended the last line.
// It is 0 while b is too short to tell (the caller reads on: neither holds
// a line end).
func (l *LineReader) skip(b []byte) int {
	if l.cr && len(b) > 0 {
		l.cr = false
		if b[0] == '\n' {
			return 1
		}
	}
	if l.bom && (len(b) >= len(bom) || !bytes.HasPrefix(bom, b)) {
		l.bom = false
		if bytes.HasPrefix(b, bom) {
			return len(bom)
		}
	}
	return 0
}

// lineEnd is the index in b of the first line end at or after from, or -1.
func (l *LineReader) lineEnd(b []byte, from int) int {
	b = b[from:]
	i := bytes.IndexByte(b, '\n')
	if !l.lf {
		s := b
		if i >= 0 {
			s = b[:i]
		}
		if j := bytes.IndexByte(s, '\r'); j >= 0 {
			i = j
		}
	}
	if i < 0 {
		return -1
	}
	return from + i
}

// slack is how many bytes past the bound a line without its end may hold
// while it is read: the CR of a CRLF, when only LF ends a line.
func (l *LineReader) slack() int {
	if l.lf {
		return 1
	}
	return 0
}

// cut returns the line that ends at b[i] and consumes it with its end.
func (l *LineReader) cut(b []byte, i int) ([]byte, bool, error) {
	n := i + 1
	if b[i] == '\r' {
		switch {
		case i+1 == len(b):
			l.cr = true
		case b[i+1] == '\n':
			n++
		}
	}
	line := b[:i]
	if len(l.buf) > 0 {
		l.buf = append(l.buf, line...)
		line = l.buf
	}
	if l.lf {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	if len(line) > l.max {
		return nil, false, ErrLineTooLong
	}
	_, _ = l.r.Discard(n)
	return line, false, nil
}

// end returns what is left at the reader's error err: the last line,
// without a line end, when there is one and err is io.EOF.
func (l *LineReader) end(err error) ([]byte, bool, error) {
	if !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	b, _ := l.r.Peek(l.r.Buffered())
	l.buf = append(l.buf, b...)
	_, _ = l.r.Discard(len(b))
	if len(l.buf) == 0 {
		return nil, false, io.EOF
	}
	line := l.buf
	if l.lf {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	if len(line) > l.max {
		return nil, false, ErrLineTooLong
	}
	return line, true, nil
}

package sse_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/e2a-pipeline/pipeline/internal/sse"
)

// lines reads all of in with a reader made by mk, one byte a read (every
// line end and byte order mark split across reads) and all at once: the
// lines ("!" after a last one without its end) and the error that ended
// them.
func lines(t *testing.T, in string, max int, mk func(*bufio.Reader, int) *sse.LineReader) ([]string, error) {
	t.Helper()
	var got [2][]string
	var errs [2]error
	for i, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in))} {
		l := mk(bufio.NewReaderSize(r, 16), max)
		for {
			line, last, err := l.ReadLine()
			if err != nil {
				errs[i] = err
				break
			}
			s := string(line)
			if last {
				s += "!"
			}
			got[i] = append(got[i], s)
		}
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) || errs[0] != errs[1] {
		t.Errorf("%q: %q, %v read whole; %q, %v a byte a read", in, got[0], errs[0], got[1], errs[1])
	}
	return got[0], errs[0]
}

// TestLineReader: CRLF, LF and a lone CR end a line (WHATWG HTML §9.2.5),
// a CRLF split across reads is one line end, a byte order mark at the
// start (only) is dropped (§9.2.6), and the bound holds for every line,
// one longer than the read buffer and a last one included.
func TestLineReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want []string
		err  error
	}{
		{"a\nb\r\nc\rd", 10, []string{"a", "b", "c", "d!"}, io.EOF},
		{"a\r\r\nb\n\r\n\rc\r", 10, []string{"a", "", "b", "", "", "c"}, io.EOF},
		{"\ufeffa\n\ufeffb\n", 10, []string{"a", "\ufeffb"}, io.EOF},
		{"\ufeff", 10, nil, io.EOF},
		{"\xef\xbb", 10, []string{"\xef\xbb!"}, io.EOF},
		{"", 10, nil, io.EOF},
		{strings.Repeat("x", 40) + "\r\n" + strings.Repeat("y", 40) + "\r", 40, []string{strings.Repeat("x", 40), strings.Repeat("y", 40)}, io.EOF},
		{"ok\n" + strings.Repeat("x", 41) + "\n", 40, []string{"ok"}, sse.ErrLineTooLong},
		{"ok\r" + strings.Repeat("x", 41) + "\r", 40, []string{"ok"}, sse.ErrLineTooLong},
		{strings.Repeat("x", 41), 40, nil, sse.ErrLineTooLong},
		{strings.Repeat("x", 8), 4, nil, sse.ErrLineTooLong},
	} {
		got, err := lines(t, tc.in, tc.max, sse.NewLineReader)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("%q: %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestLFLineReader: only LF ends a line (a CR before it dropped), and a
// byte order mark is kept.
func TestLFLineReader(t *testing.T) {
	got, err := lines(t, "\ufeffa\rb\r\nc\r", 10, sse.NewLFLineReader)
	if fmt.Sprint(got) != fmt.Sprint([]string{"\ufeffa\rb", "c!"}) || err != io.EOF {
		t.Errorf("%q, %v", got, err)
	}
	long := strings.Repeat("x", 40)
	if got, err = lines(t, long+"\r\n"+long+"\r", 40, sse.NewLFLineReader); fmt.Sprint(got) != fmt.Sprint([]string{long, long + "!"}) || err != io.EOF {
		t.Errorf("lines at the bound: %q, %v", got, err)
	}
	if _, err = lines(t, long+"x\r\n", 40, sse.NewLFLineReader); err != sse.ErrLineTooLong {
		t.Errorf("a line past the bound: %v", err)
	}
}

// FuzzLineReader: whatever the stream, reading it whole and a byte a read
// gives the same lines and the same end (lines checks it), every line
// holds no line end (an LF, or for an event stream a CR), and none is
// longer than the bound.
func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"a\nb\r\nc\rd", "\ufeffdata: x\r\n\r\n", "\r\r\n\n", "data: [DONE]", strings.Repeat("x", 40) + "\n"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max < 1 || max > 64 {
			return
		}
		for lf, mk := range map[bool]func(*bufio.Reader, int) *sse.LineReader{false: sse.NewLineReader, true: sse.NewLFLineReader} {
			got, _ := lines(t, in, max, mk)
			for _, l := range got {
				l = strings.TrimSuffix(l, "!")
				if strings.Contains(l, "\n") || !lf && strings.Contains(l, "\r") || len(l) > max {
					t.Fatalf("%q (lf %v, max %d): line %q", in, lf, max, l)
				}
			}
		}
	})
}

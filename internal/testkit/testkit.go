package testkit

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// SSEEvent is one server-sent event, or a comment line (Comment set, the
// text in Data).
type SSEEvent struct {
	ID, Event, Data string
	Retry           string
	Comment         bool
}

// ReadSSE parses an SSE body to its end into events and comments, in order.
// It returns an error for a line that is not SSE (the answer was not an
// event stream).
func ReadSSE(r io.Reader) ([]SSEEvent, error) {
	var out []SSEEvent
	var cur SSEEvent
	has := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if has {
				out = append(out, cur)
			}
			cur, has = SSEEvent{}, false
		case strings.HasPrefix(line, ":"):
			out = append(out, SSEEvent{Comment: true, Data: strings.TrimSpace(line[1:])})
		case strings.HasPrefix(line, "id:"):
			cur.ID, has = field(line, "id:"), true
		case strings.HasPrefix(line, "event:"):
			cur.Event, has = field(line, "event:"), true
		case strings.HasPrefix(line, "data:"):
			if cur.Data != "" {
				cur.Data += "\n"
			}
			cur.Data, has = cur.Data+field(line, "data:"), true
		case strings.HasPrefix(line, "retry:"):
			cur.Retry = field(line, "retry:")
		default:
			return out, fmt.Errorf("testkit: not an SSE line: %q", line)
		}
	}
	if has {
		out = append(out, cur)
	}
	return out, sc.Err()
}

func field(line, name string) string {
	v := line[len(name):]
	return strings.TrimPrefix(v, " ")
}

// MustReadSSE is ReadSSE failing t on an error.
func MustReadSSE(t testing.TB, r io.Reader) []SSEEvent {
	t.Helper()
	evs, err := ReadSSE(r)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Events returns the events of evs, without comments.
func Events(evs []SSEEvent) []SSEEvent {
	var out []SSEEvent
	for _, e := range evs {
		if !e.Comment {
			out = append(out, e)
		}
	}
	return out
}

// Eventually waits until cond holds, checking it every few milliseconds,
// and fails t naming what it waited for when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(wait)
	}
}

// Receive waits for a value on ch and returns it. When timeout passes
// first it fails t with the message of format and args, followed by how
// long it waited: the wait of a test on an event, where a hang would
// otherwise last until the test binary's own timeout.
func Receive[T any](t testing.TB, ch <-chan T, timeout time.Duration, format string, args ...any) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf(format+" (waited %v)", append(args, timeout)...)
		var zero T
		return zero
	}
}

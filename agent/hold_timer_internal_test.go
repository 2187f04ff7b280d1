package agent

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// holdTimerWriter is a writer coalescing text up to 1 KiB for at most
// delay, in the synctest bubble of its caller, on a real server's
// connection (read for its max_payload only). Each publish its coalescing
// starts is sent on published and ends there: its goroutine exits before
// any network I/O, which the bubble cannot wait for.
func holdTimerWriter(w *worker, delay time.Duration) (*writer, <-chan int64) {
	published := make(chan int64, 4)
	w.cfg.coalesceBytes, w.cfg.coalesceDelay = 1<<10, delay
	w.cfg.beforeBurst = func(_ string, seq int64, _ int) {
		published <- seq
		runtime.Goexit()
	}
	return newWriter(w, &e2a.Envelope{RequestID: "r"}, "r", "e2a.resp.r", nil, -1), published
}

// pendingTextForTest is the text wr holds back, "" with none.
func (wr *writer) pendingTextForTest() string {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.pending == nil {
		return ""
	}
	return wr.pending.b.String()
}

// advance moves a synctest bubble's fake clock on by d (its caller's
// timers that fall due meanwhile fire).
func advance(d time.Duration) { <-time.After(d) }

// TestHoldStopsTheCoalesceTimer: a coalescing timer (WithCoalesce's
// delay) started before Hold(true) does not publish the held text when it
// fires: it waits for the next write or Hold(false), which publishes it at
// once when its delay has passed, and else after the rest of it. The timer
// set flushNow and published the held text alone.
func TestHoldStopsTheCoalesceTimer(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	const delay = 10 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		wr, published := holdTimerWriter(&worker{pool: "p", cfg: defaultConfig(), js: js}, delay)
		if err := wr.Chunk(e2a.DeltaText, "a"); err != nil { // its timer starts
			t.Fatal(err)
		}
		wr.Hold(true)
		advance(2 * delay)
		synctest.Wait()
		if len(published) != 0 {
			t.Fatal("the coalescing timer published the held text")
		}
		if err := wr.Chunk(e2a.DeltaText, "b"); err != nil {
			t.Fatal(err)
		}
		if got := wr.pendingTextForTest(); got != "ab" {
			t.Fatalf("held text %q, want %q", got, "ab")
		}
		wr.Hold(false) // its delay has passed: at once
		synctest.Wait()
		if len(published) != 1 || wr.pendingTextForTest() != "" {
			t.Fatalf("Hold(false) after the delay: %d publishes, %q pending; want the text published at once",
				len(published), wr.pendingTextForTest())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		wr, published := holdTimerWriter(&worker{pool: "p", cfg: defaultConfig(), js: js}, delay)
		if err := wr.Chunk(e2a.DeltaText, "a"); err != nil {
			t.Fatal(err)
		}
		wr.Hold(true)
		advance(delay / 2)
		wr.Hold(false) // half its delay left: it waits for that
		synctest.Wait()
		if len(published) != 0 {
			t.Fatal("Hold(false) before the delay published the text at once")
		}
		advance(delay / 2)
		synctest.Wait()
		if len(published) != 1 {
			t.Fatal("the text was not published once its delay passed")
		}
	})
}

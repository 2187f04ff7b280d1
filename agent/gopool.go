package agent

import "time"

// goPool runs functions on goroutines it keeps for the next one: a
// request's two goroutines (its handling, and its handler's) each start
// with a small stack that the handler's call depth (an HTTP client, a
// JSON decoder, a NATS publish) grows by copying it, two or three times a
// request; a goroutine kept keeps its grown stack. About 11 µs of CPU a
// bridged request in the profiles at 16 clients (8 for the pipeline's own
// agent: runtime.newstack, copystack), which a kept goroutine does not pay
// (docs/performance.md, "Goroutines kept, again").
//
// A goroutine idle for goPoolIdle ends, so a burst's goroutines do not
// outlive it; close ends every idle one at once (Run, on its way out).
type goPool struct {
	work chan func()
	stop chan struct{}
	idle time.Duration
}

// goPoolIdle is how long a kept goroutine waits for work before it ends.
const goPoolIdle = 10 * time.Second

func newGoPool(idle time.Duration) *goPool {
	return &goPool{work: make(chan func()), stop: make(chan struct{}), idle: idle}
}

// Go runs f on an idle kept goroutine, or on a new one when none waits.
// f runs to its end before its goroutine takes other work; a goroutine
// that f ends (runtime.Goexit) is simply not kept.
func (p *goPool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.loop(f)
	}
}

func (p *goPool) loop(f func()) {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		f = nil // not held while idle
		t.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-t.C:
			return
		case <-p.stop:
			return
		}
	}
}

// close ends the idle goroutines, and each busy one once its f returns.
// Go still runs f after it, on a goroutine that ends with f.
func (p *goPool) close() { close(p.stop) }

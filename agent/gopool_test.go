package agent

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// goid is the calling goroutine's id, from its stack's header.
func goid() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	n, _ := strconv.Atoi(string(buf[:bytes.IndexByte(buf, ' ')]))
	return n
}

// alive reports whether the goroutine id exists.
func alive(id int) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Contains(buf, fmt.Appendf(nil, "goroutine %d [", id))
}

// run runs f on p and returns the id of the goroutine that ran it, once f
// has returned and its goroutine waits again.
func run(p *goPool, f func()) int {
	var id int
	p.Go(func() { id = goid(); f() })
	synctest.Wait()
	return id
}

func TestGoPoolKeepsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGoPool(time.Minute)
		defer p.close()
		first := run(p, func() {})
		if second := run(p, func() {}); second != first {
			t.Fatalf("the second function ran on goroutine %d, not on the kept %d", second, first)
		}
		time.Sleep(30 * time.Second) // idle, within the minute
		if third := run(p, func() {}); third != first {
			t.Fatalf("after 30 s idle: goroutine %d, not the kept %d", third, first)
		}
	})
}

func TestGoPoolRunsConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGoPool(time.Minute)
		defer p.close()
		// blocked runs n functions that each wait for release (the others
		// must not wait for one), returning their goroutines' ids.
		blocked := func(n int, release chan struct{}) map[int]bool {
			var mu sync.Mutex
			ids := map[int]bool{}
			for range n {
				p.Go(func() {
					mu.Lock()
					ids[goid()] = true
					mu.Unlock()
					<-release
				})
			}
			synctest.Wait()
			return ids
		}
		release := make(chan struct{})
		ids := blocked(3, release)
		if len(ids) != 3 {
			t.Fatalf("%d of 3 blocking functions started", len(ids))
		}
		close(release)
		synctest.Wait()
		// Three kept: three more run at once on them.
		release = make(chan struct{})
		again := blocked(3, release)
		close(release)
		for id := range again {
			if !ids[id] {
				t.Errorf("goroutine %d is new: the three kept were %v", id, ids)
			}
		}
	})
}

func TestGoPoolIdleGoroutineEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGoPool(time.Minute)
		defer p.close()
		first := run(p, func() {})
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if alive(first) {
			t.Fatalf("goroutine %d still waits after a minute idle", first)
		}
		if again := run(p, func() {}); again == first {
			t.Fatal("a function ran on the goroutine that ended")
		}
	})
}

func TestGoPoolCloseEndsIdleAndBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGoPool(time.Hour)
		release := make(chan struct{})
		var busy int
		p.Go(func() { busy = goid(); <-release })
		idle := run(p, func() {}) // on a second goroutine: the first is busy
		if idle == busy {
			t.Fatal("a function was handed to the busy goroutine")
		}
		start := time.Now()
		p.close()
		synctest.Wait()
		if alive(idle) {
			t.Fatal("close left the idle goroutine waiting")
		}
		close(release)
		synctest.Wait()
		if alive(busy) {
			t.Fatal("the busy goroutine was kept after its function, though the pool was closed")
		}
		if !time.Now().Equal(start) {
			t.Fatalf("the goroutines ended by their idle timer (%v later), not by close", time.Since(start))
		}
		// Go still runs a function after close.
		ran := make(chan struct{})
		p.Go(func() { close(ran) })
		<-ran
	})
}

func TestGoPoolGoexitEndsOnlyItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGoPool(time.Minute)
		defer p.close()
		dead := run(p, runtime.Goexit)
		if alive(dead) {
			t.Fatal("the goroutine that called Goexit is still alive")
		}
		ran := make(chan struct{})
		p.Go(func() { close(ran) })
		<-ran
	})
}

package egress

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestWaitTimersReused: the timers a read's waits arm (the wait limit, the
// poll, the heartbeat, the head hold) go back to its service's pool when
// the reader is closed and serve the next reader's waits: a stream read
// armed up to four new timers before (12 allocations per request in e2a
// bench), none now once the pool holds them. A reader closed holds none.
func TestWaitTimersReused(t *testing.T) {
	e := startEnv(t)
	s, err := New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var cfg replayConfig
	if err := applyReplay(&cfg, s.replayOptions(nil)); err != nil || cfg.timers == nil {
		t.Fatalf("a service's read has no timer pool (%v)", err)
	}
	held := false
	read := func() {
		r := Reader{cfg: cfg} // a new request's reader
		r.deadlineT = r.armTimer(r.deadlineT, time.Hour)
		r.pollT = r.armTimer(r.pollT, time.Hour)
		r.beatT = r.armTimer(r.beatT, time.Hour)
		r.holdT = r.armTimer(r.holdT, time.Hour)
		r.Close()
		held = r.deadlineT != nil || r.pollT != nil || r.beatT != nil || r.holdT != nil
	}
	read()
	if n := testing.AllocsPerRun(100, read); n > 0 && !raceEnabled {
		t.Errorf("a read's wait timers: %v allocations, want none", n)
	}
	if held {
		t.Error("a closed reader still holds its timers")
	}
}

// TestPooledTimerNoStaleFire: a timer that fired unread before its reader
// closed does not fire for the reader that takes it next before its own
// time.
func TestPooledTimerNoStaleFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var timers sync.Pool
		for range 20 {
			r := &Reader{cfg: replayConfig{timers: &timers}}
			r.pollT = r.armTimer(nil, time.Nanosecond)
			time.Sleep(time.Millisecond) // it fired; nobody read it
			r.Close()
			next := &Reader{cfg: replayConfig{timers: &timers}}
			next.pollT = next.armTimer(nil, time.Hour)
			select {
			case <-next.pollT.C:
				t.Fatal("a pooled timer delivered its previous reader's fire")
			case <-time.After(time.Minute):
			}
			next.Close()
		}
	})
}

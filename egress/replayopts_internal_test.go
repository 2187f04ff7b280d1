package egress

import (
	"testing"
	"time"
)

// TestReplayOptionsAllocs: the options of a stream's read (the service's,
// the heartbeat, what stream, openRead and open add) cost one array and
// the closures of the read's own (6 allocations; 13 before): the service's
// direct getter and wait limits are one value made by New, the heartbeat
// is set without WithHeartbeat's check (New checked the interval), and the
// array has room for the options added after. They set what they did.
func TestReplayOptionsAllocs(t *testing.T) {
	e := startEnv(t)
	s, err := New(e.nc, WithHeartbeatInterval(7*time.Second), WithWaitLimits(3*time.Second, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	beat := func() error { return nil }
	var cfg replayConfig
	read := func() {
		opts := s.replayOptions(beat)
		opts = append(opts, WithoutDecode(), withWaitHooks(nil, time.Second))
		opts = append(opts, withAgedOut(s.agedOut, nil), withPrepared(nil))
		cfg = defaultReplayConfig()
		if err := applyReplay(&cfg, opts); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, read); n > 6 {
		t.Errorf("a stream's read options: %v allocations, want at most 6", n)
	}
	if cfg.mux != s.mux || cfg.maxWait != 3*time.Second || cfg.idleTimeout != 5*time.Second || cfg.heartbeat != 7*time.Second ||
		cfg.onHeartbeat == nil || !cfg.lazy || cfg.headHold != time.Second || cfg.agedOut == nil {
		t.Errorf("options set %+v", cfg)
	}
}

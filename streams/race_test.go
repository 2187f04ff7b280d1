//go:build race

package streams_test

// raceEnabled: the race detector changes allocation counts (sync.Pool
// drops what it holds at random, the detector's own bookkeeping).
const raceEnabled = true

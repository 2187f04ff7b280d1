//go:build race

package e2a

// raceEnabled: the race detector changes allocation counts (its own
// bookkeeping, escape analysis it disables).
const raceEnabled = true

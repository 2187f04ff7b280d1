package agent

import "time"

// SetTurnGrace sets how long a turn waits for an earlier turn that is not
// stored, and returns a function that restores it. Tests that use it must
// not run in parallel with others that wait for turns.
func SetTurnGrace(d time.Duration) (restore func()) {
	old := turnGrace
	turnGrace = d
	return func() { turnGrace = old }
}

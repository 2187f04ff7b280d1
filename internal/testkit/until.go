package testkit

import "time"

// Until calls cond until it returns true or timeout has passed, with the
// waits of Eventually, and reports whether cond held. It is Eventually for
// where t.Fatalf does not fit: off the test goroutine, or in a helper that
// reports its own failure (with a log tail, or as t.Errorf).
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
	return true
}

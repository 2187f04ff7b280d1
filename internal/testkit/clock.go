package testkit

import "time"

// MidMinute returns a clock stopped 30 s into the current minute, for a
// rate limiter under test (ingress.WithLimiterClock). The limiter's windows
// are fixed and aligned on the epoch: on the wall clock the requests of a
// test could straddle a window's end (a minute's, even a day's), and the
// next window would take what the first refused.
func MidMinute() func() time.Time {
	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	return func() time.Time { return now }
}

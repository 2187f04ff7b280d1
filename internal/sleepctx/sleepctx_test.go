package sleepctx_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

var errStop = errors.New("stop")

// TestSleep: the full duration passes when ctx lives; a cancel ends the
// wait at once with ctx.Err() (Sleep) or the cause (SleepCause).
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := sleepctx.Sleep(t.Context(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Fatalf("Sleep = %v after %v, want nil after 1m", err, time.Since(start))
		}
		if err := sleepctx.SleepCause(t.Context(), time.Second); err != nil {
			t.Fatalf("SleepCause = %v, want nil", err)
		}
		for _, tc := range []struct {
			name  string
			sleep func(context.Context, time.Duration) error
			want  error
		}{{"Sleep", sleepctx.Sleep, context.Canceled}, {"SleepCause", sleepctx.SleepCause, errStop}} {
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(time.Second, func() { cancel(errStop) })
			start := time.Now()
			if err := tc.sleep(ctx, time.Hour); !errors.Is(err, tc.want) || time.Since(start) != time.Second {
				t.Fatalf("%s = %v after %v, want %v after 1s", tc.name, err, time.Since(start), tc.want)
			}
		}
	})
}

// TestTicks: one tick every d from the start; a break stops the ticker; a
// cancel ends the loop at once, between ticks.
func TestTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		for now := range sleepctx.Ticks(t.Context(), time.Second) {
			at = append(at, now.Sub(start))
			if len(at) == 3 {
				break
			}
		}
		if len(at) != 3 || at[0] != time.Second || at[1] != 2*time.Second || at[2] != 3*time.Second {
			t.Fatalf("ticks at %v, want 1s 2s 3s", at)
		}

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(2500*time.Millisecond, cancel)
		start, n := time.Now(), 0
		for range sleepctx.Ticks(ctx, time.Second) {
			n++
		}
		if n != 2 || time.Since(start) != 2500*time.Millisecond {
			t.Fatalf("%d ticks, the loop ended after %v; want 2 and 2.5s (the cancel)", n, time.Since(start))
		}
	})
}

// TestBackoff: no wait before attempt 0; before attempt n ≥ 1 a wait
// below base·2^(n−1), never past limit; a cancel ends it with ctx.Err().
func TestBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, limit = time.Millisecond, 8 * time.Millisecond
		for attempt, ceil := range []time.Duration{0, base, 2 * base, 4 * base, limit, limit, limit} {
			for range 50 {
				start := time.Now()
				if err := sleepctx.Backoff(t.Context(), attempt, base, limit); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); (ceil == 0 && d != 0) || (ceil > 0 && d >= ceil) {
					t.Fatalf("attempt %d waited %v, want below %v", attempt, d, ceil)
				}
			}
		}
		if err := sleepctx.Backoff(t.Context(), 1000, base, limit); err != nil {
			t.Fatal(err)
		}
		// A base whose doubling overflows a Duration long before the
		// attempt's: the ceiling is the limit, never a wrapped (negative,
		// so no) wait.
		for attempt := 25; attempt <= 40; attempt++ {
			var waited time.Duration
			for range 20 {
				start := time.Now()
				if err := sleepctx.Backoff(t.Context(), attempt, time.Minute, time.Hour); err != nil {
					t.Fatal(err)
				}
				d := time.Since(start)
				if d >= time.Hour {
					t.Fatalf("attempt %d of a minute's base waited %v, want below the hour's limit", attempt, d)
				}
				waited += d
			}
			if waited < 20*time.Minute {
				t.Fatalf("20 attempts %d with a minute's base and an hour's limit waited %v in all, want about 10 h", attempt, waited)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := sleepctx.Backoff(ctx, 3, time.Hour, time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("Backoff after cancel = %v, want context.Canceled", err)
		}
	})
}

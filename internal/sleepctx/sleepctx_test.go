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

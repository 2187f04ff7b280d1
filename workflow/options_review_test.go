package workflow

import (
	"context"
	"testing"
	"time"
)

// TestConfigOptionsRefusesNegativeLimits: Config.Options (the executor's
// options from E2A_WORKFLOW_*) must refuse negative limits; it passes them
// on, and a negative API-call limit silently means "no limit" (retry.go
// until: n <= 0 → 0), a negative execution time or operation count makes
// every workflow fail.
func TestConfigOptionsRefusesNegativeLimits(t *testing.T) {
	base := Config{MaxOperations: 20, MaxExecutionTime: 30 * time.Second, MaxResponseBytes: 1 << 20,
		MaxLoopIterations: 1000, MaxSteps: 1000, MaxRetries: 3, APICallsPerMinute: 30, APICallsPerHour: 500}
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"APICallsPerMinute=-1", func(c *Config) { c.APICallsPerMinute = -1 }},
		{"APICallsPerHour=-1", func(c *Config) { c.APICallsPerHour = -1 }},
		{"MaxExecutionTime=-1s", func(c *Config) { c.MaxExecutionTime = -time.Second }},
		{"MaxOperations=-1", func(c *Config) { c.MaxOperations = -1 }},
		{"MaxResponseBytes=-1", func(c *Config) { c.MaxResponseBytes = -1 }},
		{"MaxLoopIterations=-1", func(c *Config) { c.MaxLoopIterations = -1 }},
		{"MaxSteps=-1", func(c *Config) { c.MaxSteps = -1 }},
		// Taken as 0 (no retry) until it was refused like the others.
		{"MaxRetries=-1", func(c *Config) { c.MaxRetries = -1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mod(&c)
			if _, err := c.Options([]string{}, nil); err == nil {
				t.Errorf("Config{%s}.Options() accepted it, want an error", tc.name)
			}
		})
	}
}

// TestNegativeCallLimitIsNotUnlimited: NewWindowLimiter(-1, -1) lets
// every call through (no limit at all) instead of refusing the value or
// taking the spec's defaults (30 a minute, 500 an hour, as 0 does).
func TestNegativeCallLimitIsNotUnlimited(t *testing.T) {
	l := NewWindowLimiter(-1, -1, nil)
	for i := 0; i < 1000; i++ {
		ok, _, err := l.AllowCall(context.Background(), "p")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
	}
	t.Fatalf("NewWindowLimiter(-1, -1) allowed 1000 calls in a minute: a negative limit means no limit (spec default 30/min)")
}

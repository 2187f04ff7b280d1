package e2a_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestTimestampUTC: spec §4.3 makes timestamp an RFC 3339 UTC string; one
// with another offset is converted on read (issue 16: it was published as
// written), UTC forms are kept as written.
func TestTimestampUTC(t *testing.T) {
	for in, want := range map[string]string{
		"2026-03-28T14:00:00+02:00":           "2026-03-28T12:00:00+00:00",
		"2026-03-28T01:00:00.5-03:30":         "2026-03-28T04:30:00.500000+00:00",
		"2026-03-28T14:00:00.123456789+01:00": "2026-03-28T13:00:00.123456789+00:00",
		"2026-03-28T12:00:00Z":                "2026-03-28T12:00:00Z",
		"2026-03-28T12:00:00+00:00":           "2026-03-28T12:00:00+00:00",
		"yesterday":                           "yesterday",
	} {
		if got := e2a.NormalizeTime(in); got != want {
			t.Errorf("NormalizeTime(%q) = %q, want %q", in, got, want)
		}
		env, err := e2a.FromJSON([]byte(`{"timestamp":"` + in + `","deadline":"` + in + `"}`))
		if err != nil || env.Timestamp != want || env.Deadline != want {
			t.Errorf("FromJSON(%q): %+v %v", in, env, err)
		}
	}
}

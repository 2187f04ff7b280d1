package e2a_test

import (
	"strings"
	"testing"
	"time"

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

// TestParseTimeLeapSecond: RFC 3339 allows second 60 (§5.6, §5.7), which
// time.Parse refuses; ParseTime reads it as the next second where a leap
// second can be (23:59 UTC, any offset) and NormalizeTime writes that
// second in UTC. Elsewhere, and when no RFC 3339 time follows it, the
// error says why; other bad seconds keep time.Parse's error.
func TestParseTimeLeapSecond(t *testing.T) {
	for in, want := range map[string]string{
		"2016-12-31T23:59:60Z":        "2017-01-01T00:00:00+00:00",
		"2016-12-31T23:59:60.25Z":     "2017-01-01T00:00:00.250000+00:00",
		"2016-06-30T23:59:60+00:00":   "2016-07-01T00:00:00+00:00",
		"1990-12-31T15:59:60-08:00":   "1991-01-01T00:00:00+00:00",
		"1990-12-31T15:59:60.5-08:00": "1991-01-01T00:00:00.500000+00:00",
		"2017-01-01T05:29:60+05:30":   "2017-01-01T00:00:00+00:00",
	} {
		got, err := e2a.ParseTime(in)
		if err != nil || e2a.FormatTime(got) != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %s", in, got, err, want)
		}
		if n := e2a.NormalizeTime(in); n != want {
			t.Errorf("NormalizeTime(%q) = %q, want %q", in, n, want)
		}
	}
	for in, msg := range map[string]string{
		"2016-12-31T12:30:60Z":      "only valid at 23:59:60 UTC",
		"2016-12-31T23:59:60+01:00": "only valid at 23:59:60 UTC",
		"2016-12-31T23:58:60Z":      "only valid at 23:59:60 UTC",
		"9999-12-31T23:59:60Z":      "no next second",
		"2016-12-31T23:59:61Z":      "second out of range",
		"2016-12-31T23:59:60":       "second out of range",
		"2016-12-31t23:59:60z":      "cannot parse", // upper-casing is the normalizer's
	} {
		if got, err := e2a.ParseTime(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseTime(%q) = %v, %v; want an error saying %q", in, got, err, msg)
		}
		if n := e2a.NormalizeTime(in); n != in {
			t.Errorf("NormalizeTime(%q) = %q, want it unchanged", in, n)
		}
	}
}

// TestFormatTime: UTC, microseconds when there are any, "+00:00"; AppendTime
// writes the same bytes after what dst holds.
func TestFormatTime(t *testing.T) {
	east := time.FixedZone("east", 2*3600)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 3, 28, 14, 0, 0, 0, east), "2026-03-28T12:00:00+00:00"},
		{time.Date(2026, 3, 28, 14, 0, 0, 999, east), "2026-03-28T12:00:00+00:00"},
		{time.Date(2026, 3, 28, 12, 0, 0, 5000, time.UTC), "2026-03-28T12:00:00.000005+00:00"},
		{time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC), "2026-12-31T23:59:59.999999+00:00"},
	} {
		if got := e2a.FormatTime(c.t); got != c.want {
			t.Errorf("FormatTime(%v) = %q, want %q", c.t, got, c.want)
		}
		if got := string(e2a.AppendTime([]byte("x"), c.t)); got != "x"+c.want {
			t.Errorf("AppendTime(%v) = %q", c.t, got)
		}
		if len(c.want) > e2a.TimeLen {
			t.Errorf("%q longer than TimeLen %d", c.want, e2a.TimeLen)
		}
	}
}

// FuzzAppendTime: AppendTime writes what time.Time.AppendFormat writes for
// its layouts, at any instant (the years time.Unix reaches, negative ones
// and those past 9999 included).
func FuzzAppendTime(f *testing.F) {
	for _, s := range [][2]int64{{0, 0}, {1774700000, 5000}, {1774700000, 999}, {-62135596800, 0}, {253402300799, 999999999},
		{253402300800, 1000}, {-62167219201, 123456000}, {951782400, 0}, {4107542400, 1}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec%1e9).In(time.FixedZone("z", int(sec%50400)))
		u := tm.UTC()
		layout := "2006-01-02T15:04:05"
		if u.Nanosecond()/1000 != 0 {
			layout += ".000000"
		}
		want := "x" + u.Format(layout) + "+00:00"
		if got := string(e2a.AppendTime([]byte("x"), tm)); got != want {
			t.Fatalf("AppendTime(%v) = %q, want %q", tm, got, want)
		}
	})
}

func BenchmarkAppendTime(b *testing.B) {
	buf := make([]byte, 0, e2a.TimeLen)
	tm := time.Date(2026, 11, 26, 23, 54, 41, 123456789, time.UTC)
	for b.Loop() {
		buf = e2a.AppendTime(buf[:0], tm)
	}
}

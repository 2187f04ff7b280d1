package retryafter_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/retryafter"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"9223372037", time.Duration(math.MaxInt64), true},           // seconds past a Duration: not wrapped around
		{"18446744073709551616", time.Duration(math.MaxInt64), true}, // past uint64
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"soon", 0, false},
	} {
		got, ok := retryafter.Parse(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParse: never negative; seconds read exactly while they fit, the
// largest Duration past that; nothing read is (0, false).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "0", "7", "9223372036", "9223372037", "99999999999999999999", "-3", "+3", "1e3",
		now.Format(http.TimeFormat), "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := retryafter.Parse(s, now)
		if d < 0 || !ok && d != 0 {
			t.Fatalf("Parse(%q) = %v, %v", s, d, ok)
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && s[0] >= '0' && s[0] <= '9' {
			want := time.Duration(math.MaxInt64)
			if n <= math.MaxInt64/int64(time.Second) {
				want = time.Duration(n) * time.Second
			}
			if d != want || !ok {
				t.Fatalf("Parse(%q) = %v, %v; want %v", s, d, ok, want)
			}
		}
	})
}

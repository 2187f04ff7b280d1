package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse reads v, delay-seconds (RFC 9110 §10.2.3) or an HTTP date, at
// now. It returns the wait (0 for a date already past) and true, or 0 and
// false when v is empty or neither form. A number of seconds too large for
// a time.Duration is the largest one (the caller's bound then applies)
// rather than a value that wrapped around.
func Parse(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(n) * time.Second, true
	} else if allDigits(v) {
		return time.Duration(math.MaxInt64), true // beyond uint64: as large as it gets
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// allDigits reports whether s is a non-empty run of ASCII digits.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

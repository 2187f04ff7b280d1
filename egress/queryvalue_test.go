package egress

import (
	"net/http/httptest"
	"strconv"
	"testing"
)

// FuzzQueryValue: QueryValue reads a parameter as r.URL.Query().Get
// does (escapes, '+', a repeated key's first value, pairs with ';' or a
// bad escape skipped).
func FuzzQueryValue(f *testing.F) {
	for _, seed := range [][2]string{
		{"", "wait"}, {"wait=true", "wait"}, {"wait", "wait"}, {"wait=", "wait"}, {"agent=a&wait=1", "wait"},
		{"wait=1&wait=0", "wait"}, {"w%61it=true", "wait"}, {"wait=a+b%20c", "wait"}, {"wait=%zz&wait=2", "wait"},
		{"wa%zzit=1&wait=3", "wait"}, {"wait=1;x=2&wait=4", "wait"}, {"&&wait=5&", "wait"}, {"=x&wait=6", "wait"},
		{"a+b=7", "a b"}, {"a%2Bb=8", "a+b"}, {"from=12", "from"}, {"projections=True", "projections"}, {"%=1", "%"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, raw, key string) {
		r := httptest.NewRequest("GET", "/v1/requests/r", nil)
		r.URL.RawQuery = raw
		want := r.URL.Query().Get(key)
		if got := QueryValue(r, key); got != want {
			t.Errorf("QueryValue(%q, %q) = %q; url.Values.Get %q", raw, key, got, want)
		}
	})
}

// FuzzIsTrue: IsTrue is strconv.ParseBool's true.
func FuzzIsTrue(f *testing.F) {
	for _, v := range []string{"", "1", "0", "t", "T", "TRUE", "true", "True", "tRUE", "yes", "f", " true"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		b, err := strconv.ParseBool(v)
		if want := err == nil && b; IsTrue(v) != want {
			t.Errorf("IsTrue(%q) = %t, want %t", v, !want, want)
		}
	})
}

// TestQueryValueAllocs: reading a request's parameters allocates nothing
// when no value holds an escape (url.Query built its map and strings at
// each read).
func TestQueryValueAllocs(t *testing.T) {
	r := httptest.NewRequest("GET", "/v1/requests/r/stream?agent=bridge&wait=true", nil)
	n := testing.AllocsPerRun(100, func() {
		if QueryValue(r, "agent") != "bridge" || !IsTrue(QueryValue(r, "wait")) || IsTrue(QueryValue(r, "projections")) || QueryValue(r, "from") != "" {
			t.Fatal("parameters misread")
		}
	})
	if n != 0 && !raceEnabled {
		t.Errorf("%v allocations, want none", n)
	}
}

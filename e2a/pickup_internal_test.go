package e2a

import (
	"testing"
	"time"
)

// bridgedEnvelope is the envelope an agent picks up for a request of e2a
// bench --bridge openai: the E2A front door's, as the normalizer writes it.
var bridgedEnvelope = []byte(`{"protocol_version":"1.0","request_id":"bench-000123","channel":"http","method":"chat.send",` +
	`"timestamp":"2026-12-03T20:22:35.371851+00:00","params":{"text":"bench request"},"provenance":{"source_protocol":"e2a",` +
	`"converter":"e2a-pipeline/normalizer/e2a","converted_at":"2026-12-03T20:22:35.371851+00:00","details":{"op":"submit"}}}`)

// TestFromJSONAllocs: reading the envelope an agent picks up allocates the
// envelope with its provenance once and its strings once (the free-form
// objects' maps and values are jsonstr's): 13 allocations, 21 before.
func TestFromJSONAllocs(t *testing.T) {
	if envelopeKeys[keyProvenance] != "provenance" {
		t.Fatalf("keyProvenance %d is %q", keyProvenance, envelopeKeys[keyProvenance])
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := FromJSON(bridgedEnvelope); err != nil {
			t.Fatal(err)
		}
	}); n > 13 && !raceEnabled {
		t.Errorf("FromJSON of the bridged envelope: %v allocations, want at most 13", n)
	}
}

func BenchmarkFromJSONBridged(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromJSON(bridgedEnvelope); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalizeTime(b *testing.B) {
	for _, s := range []string{"2026-12-03T20:22:35.371851+00:00", "2026-12-03T20:22:35Z", "2026-12-03T22:22:35+02:00"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = NormalizeTime(s)
			}
		})
	}
}

// timeSeeds are times of every shape: the normalizer's, other offsets,
// leap seconds, days past the month's end, leap years, bad digits and
// separators, fractions of every length.
var timeSeeds = []string{
	"2026-12-03T20:22:35.371851+00:00", "2026-12-03T20:22:35Z", "2026-12-03T20:22:35-00:00", "2026-12-03T20:22:35+00:01",
	"2026-12-03T20:22:35.1Z", "2026-12-03T20:22:35.123456789012Z", "2026-12-03T20:22:35.Z", "2026-12-03T20:22:35,5Z",
	"2024-02-29T00:00:00Z", "2026-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
	"2026-00-10T00:00:00Z", "2026-13-10T00:00:00Z", "2026-12-00T00:00:00Z", "2026-12-03T24:00:00Z", "2026-12-03T23:60:00Z",
	"2016-12-31T23:59:60Z", "2016-12-31T23:59:60+00:00", "2016-12-31T12:00:60Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
	"2026-12-03t20:22:35z", "2026-12-03T20:22:35", "2026-12-03T20:22:35+0000", "2026-12-03T2:22:35Z", "2026-12-03 20:22:35Z",
	"+026-12-03T20:22:35Z", "2026-12-03T20:22:35Z ", " 2026-12-03T20:22:35Z", "2026-12-03T20:22:35+24:00", "2026-12-03T20:22:35+00:60",
	"", "x", "2026-12-03T20:22:35.371851+02:00", "2026-12-03T20:22:35.5-03:30",
}

// TestNormalizeTimeMatches: NormalizeTime answers as without its fast path.
func TestNormalizeTimeMatches(t *testing.T) {
	for _, s := range timeSeeds {
		checkNormalizeTime(t, s)
	}
}

// FuzzNormalizeTime: NormalizeTime answers as without its fast path, and a
// time the fast path keeps is one time.Parse (RFC3339Nano) reads, in UTC.
func FuzzNormalizeTime(f *testing.F) {
	for _, s := range timeSeeds {
		f.Add(s)
	}
	f.Fuzz(checkNormalizeTime)
}

func checkNormalizeTime(t *testing.T, s string) {
	t.Helper()
	if got, want := NormalizeTime(s), normalizeParsed(s); got != want {
		t.Fatalf("NormalizeTime(%q) = %q, want %q", s, got, want)
	}
	if isUTCTime(s) {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if _, off := tm.Zone(); err != nil || off != 0 {
			t.Fatalf("isUTCTime(%q), but time.Parse gives %v, %v", s, tm, err)
		}
	}
}

package egress

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A turn recorded but never stored (its publish failed) does not end the
// walk back: the turn before it, still running, is unended too. A turn
// with its final frame ends the walk, as does a run of maxUnstoredTurns
// turns not stored (history aged out).
func TestUnendedTurnsSkipsUnstoredTurn(t *testing.T) {
	e := startEnv(t)
	s, err := New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.finished(t, "turn-done", 1)
	e.running(t, "turn-a").text("a works")
	e.running(t, "turn-c") // stored, waiting: no frame
	unstored := func(n int) []string {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("turn-gap-%d", i))
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"gap", []string{"turn-done", "turn-a", "turn-gap-0", "turn-c"}, []string{"turn-c", "turn-a"}},
		{"gaps", slices.Concat([]string{"turn-a"}, unstored(maxUnstoredTurns-1), []string{"turn-c"}), []string{"turn-c", "turn-a"}},
		{"aged out", slices.Concat([]string{"turn-a"}, unstored(maxUnstoredTurns), []string{"turn-c"}), []string{"turn-c"}},
		{"final", []string{"turn-a", "turn-done", "turn-gap-0", "turn-c"}, []string{"turn-c"}},
	} {
		got, err := s.UnendedTurns(ctx, tc.ids)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: UnendedTurns(%q) = %q, want %q", tc.name, tc.ids, got, tc.want)
		}
	}
}

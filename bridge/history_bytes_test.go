package bridge

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// largeConversation stores n earlier turns of size bytes of text each
// (h0 the oldest) and a last one being served, each recorded in its
// conversation, and returns the last turn's envelope and conversation.
func largeConversation(t *testing.T, n, size int) (*Conversations, *e2a.Envelope, Conversation) {
	t.Helper()
	nc, js, ctx, convs := openConversations(t)
	var last *e2a.Envelope
	for i := 0; i <= n; i++ {
		id := "h" + strconv.Itoa(i)
		last = storeTurn(t, nc, js, ctx, id, "alice", "ctx-big", strings.Repeat(strconv.Itoa(i%10), size), i < n)
		if err := convs.Update(ctx, "p", last, func(*Conversation) {}); err != nil {
			t.Fatal(err)
		}
	}
	conv, _, err := convs.Get(ctx, "p", last)
	if err != nil || len(conv.RequestIDs) != n+1 {
		t.Fatalf("Get: %d ids, %v", len(conv.RequestIDs), err)
	}
	return convs, last, conv
}

// TestHistoryBytesBound: History reads the newest turns whose stored
// bytes (envelope and final frame) fit in maxBytes and stops at the one
// that would pass it, leaving it and every older turn out (cut): the
// newest kept, the oldest dropped, in order. It read and decoded every
// stored turn whatever its size (a colleague measured 96.9 MiB allocated
// for 63 turns of 512 KiB in one request).
func TestHistoryBytesBound(t *testing.T) {
	const size = 256 << 10
	convs, last, conv := largeConversation(t, 40, size)
	ctx := t.Context()

	// One call under a 1 MiB bound allocates a fraction of what a call
	// reading every turn does, measured in the same run (the process's
	// allocations include the embedded server's: its block cache, loaded
	// or not, made one run 12.3 MiB where others made 3.4, so no fixed
	// bound holds): the bound read all 40 stored turns before, as much.
	const bound = 1 << 20
	alloc := func(maxBytes int) (uint64, []Turn, error) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		turns, _, err := convs.History(ctx, "p", last, conv, maxBytes)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, turns, err
	}
	all, every, err := alloc(math.MaxInt)
	if err != nil || len(every) != 40 {
		t.Fatalf("History without a bound: %d turns, %v", len(every), err)
	}
	got, turns, err := alloc(bound)
	t.Logf("one History call under %d MiB: %.1f MiB allocated, %d turns; without a bound %.1f MiB, %d turns",
		bound>>20, float64(got)/(1<<20), len(turns), float64(all)/(1<<20), len(every))
	if got > all/4 {
		t.Fatalf("one History call under %d MiB allocated %.1f MiB, more than a quarter of the %.1f MiB of one reading every turn",
			bound>>20, float64(got)/(1<<20), float64(all)/(1<<20))
	}
	if err != nil || len(turns) != 3 {
		t.Fatalf("History under 1 MiB: %d turns, %v", len(turns), err)
	}

	turns, cut, err := convs.History(ctx, "p", last, conv, 3*size+size/2)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range turns {
		ids = append(ids, tr.Envelope.RequestID)
	}
	if !cut || !slices.Equal(ids, []string{"h37", "h38", "h39"}) {
		t.Fatalf("History under 3.5 turns' bytes: %v, cut %v; want h37 h38 h39, cut", ids, cut)
	}
	if turns[2].Final == nil || !turns[2].Final.IsFinal {
		t.Fatalf("h39's final frame: %+v", turns[2].Final)
	}
	if turns, cut, err := convs.History(ctx, "p", last, conv, 64*size); err != nil || cut || len(turns) != 40 ||
		turns[0].Envelope.RequestID != "h0" {
		t.Fatalf("History under 64 turns' bytes: %d turns, cut %v, %v; want all 40 from h0", len(turns), cut, err)
	}
	if turns, cut, err := convs.History(ctx, "p", last, conv, 0); err != nil || !cut || len(turns) != 0 {
		t.Fatalf("History under 0 bytes: %d turns, cut %v, %v", len(turns), cut, err)
	}
}

// TestMaxHistoryBytesOption: the bound is 0..MaxHistoryBytesLimit.
func TestMaxHistoryBytesOption(t *testing.T) {
	type cfg struct{ n int }
	for _, n := range []int{-1, MaxHistoryBytesLimit + 1} {
		var c cfg
		if err := MaxHistoryBytesOption(n, func(c *cfg) { c.n = n })(&c); !errors.Is(err, ErrInvalidOption) || c.n != 0 {
			t.Errorf("%d taken", n)
		}
	}
	var c cfg
	if err := MaxHistoryBytesOption(0, func(c *cfg) { c.n = 1 })(&c); err != nil || c.n != 1 {
		t.Errorf("0 refused: %v", err)
	}
}

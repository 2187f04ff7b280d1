package egress

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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

// TestCancelTurnsEndedMeanwhile: CancelTurns reads the turns before the
// newest (UnendedTurns), then asks the newest's cancel; turns that end
// between the two leave an earlier turn read running and the newest ended
// (its final frame written: an answer of an interrupted task and the
// answer queued behind it, both ending as tasks/cancel comes). The
// newest's end is the task's: ErrNotCancelable, no cancel sent. A newest
// never published (refused once recorded: the task had ended) leaves the
// task's end to the earlier turn, which ends otherwise than canceled once
// asked: ErrNotCancelable too. Both answered nil (the newest taken for one
// never published, the earlier turn's end dropped): A2A's tasks/cancel
// answered a task input-required or completed as cancelled, its cancel
// mark left in the record.
func TestCancelTurnsEndedMeanwhile(t *testing.T) {
	e := startEnv(t)
	s, err := New(e.nc, WithCancelWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.finished(t, "turn-asked", 0)
	e.finished(t, "turn-newest", 0)
	for _, tc := range []struct {
		name, answer, newest string
		wantAsked            []string
	}{
		{"newest ended", "turn-answer-a", "turn-newest", nil},
		{"newest never published", "turn-answer-b", "turn-unpublished", []string{"turn-unpublished", "turn-answer-b"}},
	} {
		answer := e.running(t, tc.answer) // read running: it ends once asked
		var asked []string
		ok, err := s.CancelTurns(ctx, []string{"turn-asked", tc.answer, tc.newest}, func(_ context.Context, id string) error {
			asked = append(asked, id)
			if id == tc.answer {
				answer.complete(map[string]any{"content": "ended meanwhile"})
			}
			return nil
		})
		if ok || !errors.Is(err, ErrNotCancelable) || !slices.Equal(asked, tc.wantAsked) {
			t.Errorf("%s: CancelTurns = %v, %v, cancels sent %q; want ErrNotCancelable, %q sent", tc.name, ok, err, asked, tc.wantAsked)
		}
	}
}

// TestCancelTurnsAwaitsListedTurn: a turn listed after a stored one but
// not stored itself is publishing (ingress records a turn before it
// publishes it): CancelTurns awaits its store and cancels it with the
// others. It skipped it (UnendedTurns), so that turn ran on and the turns
// queued behind it, cancelled, waited for its end (a helper's stress test
// of answers racing a cancel: about 1 in 40). The turn is stored here
// once the request stream has been asked for it a second time, which the
// walk back alone does not do: the test does not depend on timing.
func TestCancelTurnsAwaitsListedTurn(t *testing.T) {
	e := startEnv(t)
	s, err := New(e.nc, WithCancelWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.finished(t, "turn-asked", 0)
	e.running(t, "turn-first")
	e.running(t, "turn-newest")
	var asks atomic.Int32
	publish := make(chan struct{})
	var once sync.Once
	ask := func(m *nats.Msg) {
		if strings.Contains(m.Subject+string(m.Data), "turn-listed") && asks.Add(1) > 2 {
			once.Do(func() { close(publish) })
		}
	}
	for _, subj := range []string{"$JS.API.DIRECT.GET.>", "$JS.API.STREAM.MSG.GET.>"} {
		sub, err := e.nc.Subscribe(subj, ask)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	e.async(func() {
		select {
		case <-publish:
			e.running(t, "turn-listed")
		case <-ctx.Done():
		}
	})
	var sent []string
	_, err = s.CancelTurns(ctx, []string{"turn-asked", "turn-first", "turn-listed", "turn-newest"}, func(_ context.Context, id string) error {
		sent = append(sent, id)
		return nil
	})
	if err != nil || !slices.Equal(sent, []string{"turn-newest", "turn-listed", "turn-first"}) {
		t.Errorf("CancelTurns: %v, cancels sent %q; want the newest, the listed turn once stored, the first", err, sent)
	}
}

package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestKeepListOneKeeper: the keeper list's key of a turn has one
// keeper. Replica a lists its turn at a look that finds it running; b and
// c both find the key stale at the same revision and take it over: one
// write is stored, the other refused, so one of them keeps it; a's next
// write is refused then and a keeps the turn no more. A replica that
// finds the key made by another as it lists the turn itself (a push
// config stored there) takes it over with both replicas' principals.
// The keeper deletes the key as it drops the turn.
func TestKeepListOneKeeper(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	const every = time.Minute
	replica := func() *Server {
		return &Server{opts: options{tasks: ts, log: slog.New(slog.DiscardHandler)}, keeper: recordKeeper{turns: map[keptTurn]keptState{}}}
	}
	a, b, c := replica(), replica(), replica()
	turn := keptTurn{KindTask, "t1", "r1"}
	key, _ := keepListKey(turn.requestID)
	stA, keep := a.listTurn(ctx, turn, keptState{pushTo: []string{"alice"}}, every)
	e, err := ts.kv.Get(ctx, key)
	if !keep || err != nil || e.Revision() != stA.listRev {
		t.Fatalf("a's listing: keep %v, key %v (revision %d, a wrote %d)", keep, err, e.Revision(), stA.listRev)
	}
	if again, _ := a.listTurn(ctx, turn, stA, every); again.listRev != stA.listRev {
		t.Errorf("a's key written again at a look %v after it was written: revision %d, want %d (not written)", time.Since(stA.listAt), again.listRev, stA.listRev)
	}
	// b and c take the key over at the revision they listed.
	byB, byC := b.takeListed(ctx, e, every), c.takeListed(ctx, e, every)
	if byB == byC || len(b.keeper.turns)+len(c.keeper.turns) != 1 {
		t.Fatalf("b took it: %v, c: %v (turns kept %d, %d), want exactly one", byB, byC, len(b.keeper.turns), len(c.keeper.turns))
	}
	taker, other := b, c
	if byC {
		taker, other = c, b
	}
	stA.listAt = time.Time{} // due for a write
	if _, keep := a.listTurn(ctx, turn, stA, every); keep {
		t.Error("a's write of the key taken over: keep, want it refused and the turn kept no more")
	}
	// The other lists the turn at its own look: the key exists, taken
	// over with bob's configs added.
	stO, keep := other.listTurn(ctx, turn, keptState{pushTo: []string{"bob"}}, every)
	e, err = ts.kv.Get(ctx, key)
	if !keep || err != nil || e.Revision() != stO.listRev {
		t.Fatalf("the other's listing of the turn: keep %v, key %v (revision %d, written %d)", keep, err, e.Revision(), stO.listRev)
	}
	var l keepListing
	if err := json.Unmarshal(e.Value(), &l); err != nil || !slices.Contains(l.PushTo, "alice") || !slices.Contains(l.PushTo, "bob") {
		t.Errorf("the key after the other took it: %s %v, want alice's and bob's configs", e.Value(), err)
	}
	stT := taker.keeper.turns[turn]
	stT.listAt = time.Time{}
	if _, keep := taker.listTurn(ctx, turn, stT, every); keep {
		t.Error("the taker's write of the key the other listed since: keep, want refused")
	}
	taker.unlistTurn(ctx, turn, stT) // refused: not its key any more
	if _, err := ts.kv.Get(ctx, key); err != nil {
		t.Fatalf("the key after a former keeper's delete: %v, want kept", err)
	}
	other.unlistTurn(ctx, turn, stO)
	if _, err := ts.kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the key after its keeper dropped the turn: %v, want deleted", err)
	}
}

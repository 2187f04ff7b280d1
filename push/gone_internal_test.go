package push

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestGoneSparesConfigSetAgain: a 410 deletes the config that was
// posted to, not one set again under its id since (by another call of
// the client, maybe to a new webhook): that one stays, and the gone one
// is done with (errGone); the config posted to is deleted, with its
// cursor's key.
func TestGoneSparesConfigSetAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, nc := natstest.RunServer(t)
	st, err := NewStore(ctx, nc, WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := st.Create(ctx, "alice", Config{TaskID: "t1", ID: "hook", URL: "http://127.0.0.1:1/old"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.Create(ctx, "alice", Config{TaskID: "t1", ID: "hook", URL: "http://127.0.0.1:1/new"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Created.Equal(old.Created) {
		t.Fatalf("the config set again has the old one's Created time %v", old.Created)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := &stage{ctx: ctx, nc: nc, js: st.js, kv: st.kv, o: st.o, metrics: m, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ref := configRef{"alice", "t1", "hook"}
	if err := s.unsubscribed(item{ref: ref, cfg: old}, event{id: "r:0:0"}); !errors.Is(err, errGone) {
		t.Errorf("410 of the config set again since: %v, want errGone", err)
	}
	if c, err := st.Get(ctx, "alice", "t1", "hook"); err != nil || c.URL != again.URL {
		t.Fatalf("the config set again: %+v, %v; want it kept", c, err)
	}
	if _, err := st.kv.Put(ctx, ref.cursorKey(), []byte(`{"event":0}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.unsubscribed(item{ref: ref, cfg: again}, event{id: "r:1:0"}); err != nil {
		t.Fatalf("410 of the config: %v", err)
	}
	if _, err := st.Get(ctx, "alice", "t1", "hook"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after its 410: %v, want ErrNotFound", err)
	}
	if _, err := st.kv.Get(ctx, ref.cursorKey()); err == nil {
		t.Errorf("its cursor is still stored")
	}
}

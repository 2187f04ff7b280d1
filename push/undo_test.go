package push_test

import (
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/push"
)

// CreateUndoable's undo takes its call back: a new config is removed, a
// replaced one put back as it was, and a config changed since is left as
// it is (another call's).
func TestCreateUndoable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := tctx(t)
	const alice, task = "alice", "task-undo"
	cfg := func(id, url string) push.Config { return push.Config{TaskID: task, ID: id, URL: url} }

	created, undo, err := e.store.CreateUndoable(ctx, alice, cfg("", "http://127.0.0.1:1/new"))
	if err != nil || created.ID == "" {
		t.Fatalf("CreateUndoable: %+v %v", created, err)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Get(ctx, alice, task, created.ID); !errors.Is(err, push.ErrNotFound) {
		t.Errorf("a new config undone: Get says %v, want ErrNotFound", err)
	}
	if cs, _, err := e.store.List(ctx, alice, task, 0, ""); err != nil || len(cs) != 0 {
		t.Errorf("a new config undone: the task lists %+v %v", cs, err)
	}

	kept, err := e.store.Create(ctx, alice, cfg("hook", "http://127.0.0.1:1/kept"))
	if err != nil {
		t.Fatal(err)
	}
	if _, undo, err = e.store.CreateUndoable(ctx, alice, cfg("hook", "http://127.0.0.1:1/replacing")); err != nil {
		t.Fatal(err)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := e.store.Get(ctx, alice, task, "hook"); err != nil || got.URL != kept.URL || !got.Created.Equal(kept.Created) || got.From != kept.From {
		t.Errorf("a replacing config undone: %+v %v, want the replaced one back %+v", got, err, kept)
	}

	if _, undo, err = e.store.CreateUndoable(ctx, alice, cfg("hook", "http://127.0.0.1:1/undone-late")); err != nil {
		t.Fatal(err)
	}
	later, err := e.store.Create(ctx, alice, cfg("hook", "http://127.0.0.1:1/later"))
	if err != nil {
		t.Fatal(err)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := e.store.Get(ctx, alice, task, "hook"); err != nil || got.URL != later.URL {
		t.Errorf("undo after another call replaced the config: %+v %v, want that call's %s", got, err, later.URL)
	}
}

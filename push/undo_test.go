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

// A message's inline config without id that is the same as one the task
// has (URL, token, authentication, version) is that config: answered with
// its id, kept as stored (Created, From), and its undo, when the message
// is refused, leaves it there. One that differs is a new config, undone
// as any.
func TestCreateUndoableSameConfigIsTheTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := tctx(t)
	const alice, task = "alice", "task-same"
	auth := &push.Auth{Scheme: "bearer", Credentials: "cr"}
	first, _, err := e.store.CreateUndoable(ctx, alice, push.Config{TaskID: task, URL: "http://127.0.0.1:1/same", Token: "tk", Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	again, undo, err := e.store.CreateUndoable(ctx, alice, push.Config{TaskID: task, URL: "http://127.0.0.1:1/same", Token: "tk", Auth: auth})
	if err != nil || again.ID != first.ID || !again.Created.Equal(first.Created) || again.From != first.From {
		t.Fatalf("the same inline config again: %+v %v, want the task's %+v as stored", again, err, first)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	if cs, _, err := e.store.List(ctx, alice, task, 0, ""); err != nil || len(cs) != 1 || cs[0].ID != first.ID {
		t.Errorf("after the undo of a refused message that named the task's config again: %+v %v, want that config kept", cs, err)
	}
	other, undo, err := e.store.CreateUndoable(ctx, alice, push.Config{TaskID: task, URL: "http://127.0.0.1:1/same", Token: "other"})
	if err != nil || other.ID == first.ID {
		t.Fatalf("another token: %+v %v, want a new config", other, err)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	if cs, _, err := e.store.List(ctx, alice, task, 0, ""); err != nil || len(cs) != 1 {
		t.Errorf("a new config undone: %d configs %v, want the first alone", len(cs), err)
	}
	// Set again by id with the same fields (Create): kept as stored.
	if got, err := e.store.Create(ctx, alice, push.Config{TaskID: task, ID: first.ID, URL: "http://127.0.0.1:1/same", Token: "tk", Auth: auth}); err != nil || !got.Created.Equal(first.Created) || got.From != first.From {
		t.Errorf("the same config set again by id: %+v %v, want it kept as stored %+v", got, err, first)
	}
}

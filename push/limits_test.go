package push_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/e2a-pipeline/pipeline/push"
)

// TestOnePageHoldsATask pins what A2A v0.3's list relies on (it has no
// page parameters and answers one page of MaxPageSize): the per-task limit
// is at most MaxPageSize, and a task with that many configs lists them all
// in one page, with no next page.
func TestOnePageHoldsATask(t *testing.T) {
	e := newEnv(t, push.WithMaxPerTask(push.MaxPageSize))
	if _, err := push.NewStore(tctx(t), e.nc, push.WithMaxPerTask(push.MaxPageSize+1)); !errors.Is(err, push.ErrInvalidOption) {
		t.Fatalf("WithMaxPerTask(%d): %v, want ErrInvalidOption", push.MaxPageSize+1, err)
	}
	for i := range push.MaxPageSize {
		e.create("alice", push.Config{TaskID: "t1", ID: fmt.Sprintf("c%03d", i), URL: "http://127.0.0.1/hook"})
	}
	if _, err := e.store.Create(tctx(t), "alice", push.Config{TaskID: "t1", URL: "http://127.0.0.1/hook"}); !errors.Is(err, push.ErrLimit) {
		t.Fatalf("config %d: %v, want ErrLimit", push.MaxPageSize+1, err)
	}
	cs, next, err := e.store.List(tctx(t), "alice", "t1", push.MaxPageSize, "")
	if err != nil || len(cs) != push.MaxPageSize || next != "" {
		t.Fatalf("one page of %d: %d configs, next %q, %v", push.MaxPageSize, len(cs), next, err)
	}
}

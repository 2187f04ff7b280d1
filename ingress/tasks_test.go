package ingress_test

import (
	"context"
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// newTaskStore returns a task store on a server of its own, and the
// server's JetStream (the internal tests' helper).
var newTaskStore = ingress.NewTestTaskStore

// TestTaskStoreAppendNew: a new task is recorded in one write; an id that
// exists after all is appended to, as Append does, and never taken from
// another principal.
func TestTaskStoreAppendNew(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	alice, bob := tenant.Principal{ID: "alice"}, tenant.Principal{ID: "bob"}
	base := ingress.TaskRecord{ID: "t-1", ContextID: "c-1", Protocol: "a2a", Principal: "alice"}
	rec, err := ts.AppendNew(ctx, ingress.KindTask, base, "r-1", alice)
	if err != nil || len(rec.RequestIDs) != 1 || rec.Created == "" {
		t.Fatalf("new: %+v %v", rec, err)
	}
	rec, err = ts.AppendNew(ctx, ingress.KindTask, base, "r-2", alice)
	if err != nil || len(rec.RequestIDs) != 2 || rec.LastRequest() != "r-2" {
		t.Fatalf("existing id: %+v %v", rec, err)
	}
	if _, err := ts.AppendNew(ctx, ingress.KindTask, ingress.TaskRecord{ID: "t-1", Principal: "bob"}, "r-3", bob); !errors.Is(err, ingress.ErrTaskNotFound) {
		t.Fatalf("another principal's id: %v", err)
	}
	got, err := ts.Get(ctx, ingress.KindTask, "t-1")
	if err != nil || len(got.RequestIDs) != 2 || got.Principal != "alice" {
		t.Fatalf("stored: %+v %v", got, err)
	}
}

// TestTaskStoreAppendNewOverDeleted: a task id whose key holds a delete
// marker (deleted, or purged by an operator) is created afresh: the one-write
// create leaves that case to jetstream's Create, which writes over it.
func TestTaskStoreAppendNewOverDeleted(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	alice := tenant.Principal{ID: "alice"}
	base := ingress.TaskRecord{ID: "t-del", Protocol: "a2a", Principal: "alice"}
	if _, err := ts.AppendNew(ctx, ingress.KindTask, base, "r-1", alice); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, ingress.KindTask+".t-del"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Get(ctx, ingress.KindTask, "t-del"); !errors.Is(err, ingress.ErrTaskNotFound) {
		t.Fatalf("deleted record: %v", err)
	}
	rec, err := ts.AppendNew(ctx, ingress.KindTask, base, "r-2", alice)
	if err != nil || len(rec.RequestIDs) != 1 || rec.LastRequest() != "r-2" {
		t.Fatalf("over the delete marker: %+v %v", rec, err)
	}
	got, err := ts.Get(ctx, ingress.KindTask, "t-del")
	if err != nil || len(got.RequestIDs) != 1 || got.LastRequest() != "r-2" {
		t.Fatalf("stored: %+v %v", got, err)
	}
}

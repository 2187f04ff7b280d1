package egress

import (
	"context"
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// LoadRequestHead reads what the ownership rule reads of a request: an
// envelope naming its user alone (no frame read), the first frame of a
// request whose envelope is gone or names no user, ErrNotFound for one
// with neither; LoadRequests of the same ids reads every frame.
func TestLoadRequestHead(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	svc := newService(t, e)
	ctx := context.Background()

	named := e.running(t, "head-named")
	named.text("a")
	named.text("b")
	anonymous := newEnvelope("head-anonymous")
	anonymous.UserID = ""
	e.submit(t, anonymous)
	w := e.writer(t, anonymous)
	w.text("c")
	w.text("d")
	gone := e.writer(t, newEnvelope("head-gone")) // frames with no envelope
	gone.text("e")
	gone.text("f")

	gets := natstest.DirectGets(t, e.nc, streams.ResponsesStream)
	rq, err := svc.LoadRequestHead(ctx, "head-named")
	if err != nil || rq.Envelope.UserID != "u_001" || len(rq.Frames) != 0 {
		t.Fatalf("a request whose envelope names its user: %+v %v, want the envelope alone", rq, err)
	}
	if n := gets.Count(t); n != 0 {
		t.Errorf("%d direct gets of frames for a request whose envelope names its user", n)
	}
	for _, id := range []string{"head-anonymous", "head-gone"} {
		rq, err := svc.LoadRequestHead(ctx, id)
		if err != nil || rq.Envelope == nil || rq.Envelope.RequestID != id || len(rq.Frames) != 1 || rq.Frames[0].Sequence != 0 {
			t.Fatalf("%s: %+v %v, want its envelope (or one of its id) and its first frame", id, rq, err)
		}
		all, err := svc.LoadRequests(ctx, []string{id})
		if err != nil || len(all) != 1 || len(all[0].Frames) != 2 {
			t.Fatalf("LoadRequests of %s: %+v %v, want both frames", id, all, err)
		}
	}
	if _, err := svc.LoadRequestHead(ctx, "head-unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown request: %v, want ErrNotFound", err)
	}
}

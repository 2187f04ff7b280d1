package streams_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func TestDirectGetterSharedInbox(t *testing.T) {
	_, nc, js := startApplied(t)
	seqs := fill(t, js, 600, 20) // 30 frames per request
	g, err := streams.NewDirectGetter(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	// Many concurrent readers on one inbox each get their own frames, in
	// order, paged by batch.
	var wg sync.WaitGroup
	for r := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "req-" + itoaTest(r)
			subj, _ := subjects.Response(id)
			var got []uint64
			start := uint64(0)
			for {
				pending, err := g.GetBatch(ctx(t), streams.ResponsesStream, subj, start, 7, 0, func(seq uint64, h nats.Header, data []byte) error {
					if h.Get(subjects.HeaderRequestID) != id {
						t.Errorf("frame of %q in the reply of %q", h.Get(subjects.HeaderRequestID), id)
					}
					got = append(got, seq)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if pending == 0 {
					break
				}
				start = got[len(got)-1] + 1
			}
			want := seqs[id]
			if len(got) != len(want) {
				t.Errorf("%s: %d frames, want %d", id, len(got), len(want))
				return
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s: frame %d at seq %d, want %d", id, i, got[i], want[i])
					return
				}
			}
		}()
	}
	wg.Wait()

	// Nothing stored: no call of fn, no error.
	none, _ := subjects.Response("no-such-request")
	n := 0
	if _, err := g.GetBatch(ctx(t), streams.ResponsesStream, none, 0, 5, 0, func(uint64, nats.Header, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("unknown subject: %d frames, %v", n, err)
	}

	// Last by a wildcard subject.
	last, err := g.GetLast(ctx(t), streams.ResponsesStream, "e2a.resp.*")
	if err != nil || last == nil {
		t.Fatalf("last: %v %v", last, err)
	}
	if m, err := g.GetLast(ctx(t), streams.ResponsesStream, none); err != nil || m != nil {
		t.Fatalf("last of unknown: %v %v", m, err)
	}

	// A context already cancelled sends nothing and reads nothing, though
	// the frames are there to be read (before, the request went out and its
	// reply raced the cancel: under load the reply won about half the time).
	sent, err := nc.SubscribeSync(subjects.DirectGet(streams.ResponsesStream))
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	subj, _ := subjects.Response("req-0")
	for range 20 {
		n := 0
		if _, err := g.GetBatch(c, streams.ResponsesStream, subj, 0, 5, 0, func(uint64, nats.Header, []byte) error { n++; return nil }); !errors.Is(err, context.Canceled) || n != 0 {
			t.Fatalf("cancelled GetBatch: %d frames, %v", n, err)
		}
		if m, err := g.GetLast(c, streams.ResponsesStream, subj); !errors.Is(err, context.Canceled) || m != nil {
			t.Fatalf("cancelled GetLast: %v, %v", m, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sent.Pending(); n != 0 {
		t.Fatalf("%d direct gets sent with a cancelled context", n)
	}
}

func itoaTest(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoaTest(i/10) + digits[i%10:i%10+1]
}

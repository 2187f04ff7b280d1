package egress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestReplayCluster: on a 3-node cluster (R3 streams, direct gets answered
// by any replica, live interest propagated between servers), readers on
// every node, opened while frames are written through another, see every
// frame exactly once.
func TestReplayCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster")
	}
	c := natstest.RunCluster(t, 3)
	leader := c.StreamLeader(DefaultResponsesStream)
	wnc, err := c.Node((leader + 1) % 3).Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer wnc.Close()
	e := &testEnv{nc: wnc, js: natstest.JetStream(t, wnc)}
	var readers [3]*testEnv
	for i := range readers {
		nc, err := c.Node(i).Connect()
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		readers[i] = &testEnv{nc: nc}
	}
	const requests, frames = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < requests; i++ {
		id := fmt.Sprintf("cl_%d", i)
		env := newEnvelope(id)
		e.submit(t, env)
		w := e.writer(t, env)
		for j, rd := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // the behaviour: readers join at random points of the write
				from := int64(j * 5)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				got, err := collect(t, ctx, rd.nc, id, from)
				if err != nil {
					errs <- fmt.Errorf("%s node %d: %w", id, j, err)
					return
				}
				if int64(len(got)) != frames+1-from {
					errs <- fmt.Errorf("%s node %d: %d frames", id, j, len(got))
					return
				}
				for k, f := range got {
					if f.Response.Sequence != from+int64(k) {
						errs <- fmt.Errorf("%s node %d: frame %d has sequence %d", id, j, k, f.Response.Sequence)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < frames; k++ {
				w.text("c")
				if k%5 == 0 {
					time.Sleep(2 * time.Millisecond) // the behaviour: a paced writer, so readers overlap it
				}
			}
			w.complete("done")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// An unknown request is still unknown on every node.
	for i, rd := range readers {
		if _, err := collect(t, context.Background(), rd.nc, "nope", 0); err == nil {
			t.Errorf("node %d: unknown request found", i)
		}
	}
}

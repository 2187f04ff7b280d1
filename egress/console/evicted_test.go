package console_test

import (
	"bytes"
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestAnsweredRequestWithEvictedFramesIsExpired: a request that was
// answered and whose frames E2A_RESPONSES dropped since (full, DiscardOld,
// or past its age) was listed as pending, as if its agent had not started.
// It is expired: its answer is no longer held (its pool's consumer
// acknowledged it, which the agent does only once its final frame is
// stored, and no frame of it is left), in the list, a lookup, the detail
// API and the status filter. A request no agent took stays pending
// (TestProgressFromFrames, TestIndexPaging).
func TestAnsweredRequestWithEvictedFramesIsExpired(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	ctx := context.Background()
	id := p.submit(t, `{"params":{"text":"soon gone","frames":2}}`)
	waitFinal(t, p, id)
	natstest.Purge(t, natstest.JetStream(t, p.nc), streams.ResponsesStream) // evicted

	// The check reads the pool's ack floor, cached a few seconds.
	waitFor(t, 20*time.Second, "the request shown expired", func() bool {
		e, err := p.con.Lookup(ctx, id)
		return err == nil && e != nil && e.Status == console.StatusExpired
	})
	pg, err := p.con.List(ctx, console.Query{Status: console.StatusExpired})
	if err != nil || len(pg.Entries) != 1 || pg.Entries[0].RequestID != id || pg.Entries[0].Frames != 0 {
		t.Errorf("list of status expired: %+v, %v; want the request alone, no frame", pg.Entries, err)
	}
	pg, err = p.con.List(ctx, console.Query{Status: console.StatusPending})
	if err != nil || len(pg.Entries) != 0 {
		t.Errorf("list of status pending: %+v, %v; want none", pg.Entries, err)
	}
	resp, b := p.do(t, "GET", "/console/api/requests?"+url.Values{"status": {console.StatusExpired}}.Encode(), "")
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"status":"expired"`)) {
		t.Errorf("GET /console/api/requests?status=expired: %d %s", resp.StatusCode, b)
	}
}

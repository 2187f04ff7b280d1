package egress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestLiveIgnoresConsumerDeliveries: a request's live frames are the
// response stream's RePublish on e2a.live.<id>, which has no reply
// subject. A NATS user who may create consumers (the deployment's serve,
// ingress and workflow users may, of their own buckets) can have the
// server deliver its own bytes there too (a push consumer whose
// deliver_subject is that subject), whatever its publish permissions. The
// reader took such a delivery as a frame: another principal's client was
// shown a forged chunk, and the stored chunk of that place was dropped as
// already read. Deliveries with a reply subject are not the republish and
// are ignored.
func TestLiveIgnoresConsumerDeliveries(t *testing.T) {
	e := startEnv(t)
	const id = "req_forged"
	w := e.running(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Only live frames (no poll) bring the answer.
	r, err := Open(ctx, e.nc, id, 0, WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	forged := w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "FORGED"})
	m := nats.NewMsg("")
	m.Data, _ = e2a.MarshalResponse(forged)
	m.Header.Set(subjects.HeaderRequestID, id)
	m.Header.Set(subjects.HeaderSequence, "0")
	m.Header.Set(subjects.HeaderStreamSequence, "1")
	live, _ := subjects.Live(id)
	natstest.DeliverByConsumer(t, e.nc, live, m)

	w.text("real")
	w.complete("done")
	var got []string
	for {
		f, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, string(f.Response.Body))
		if f.Response.IsFinal {
			break
		}
	}
	if len(got) != 2 || strings.Contains(got[0], "FORGED") || !strings.Contains(got[0], "real") {
		t.Fatalf("the reader gave %q; want the stored chunk \"real\" then the final frame, nothing of the forged delivery", got)
	}
}

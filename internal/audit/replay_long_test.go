package audit_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestReplayStreamsALongRequest: `e2a replay <id>` of a request of many
// frames prints its records as it reads its frames, a page of direct gets
// at a time. It read every frame of the request, and built every frame's
// record, before it printed the first: for a request of 100,000 frames
// (bursts of 100), the live heap grew 127 MiB (30 MiB now, the in-process
// test server's caches included) and nothing was printed for 3 s (37 ms
// now).
// Here the auditor's connection has received under half the request's
// frames when its first frame is printed, by the hot path of a scan
// (--pool) as by an id, and every frame is printed once, in order.
func TestReplayStreamsALongRequest(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	const n, per = 20_000, 100
	id := "long"
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
	var last uint64
	stored := 0
	for first := 0; first < n; first += per {
		fr := make([][]byte, per)
		for i := range per {
			fr[i] = frame(id, int64(first+i), first+i == n-1)
			stored += len(fr[i])
		}
		last = natstest.PublishBurst(t, nc, id, int64(first), last, fr...)
	}
	for name, q := range map[string]audit.Query{"by id": {RequestIDs: []string{id}}, "scan --pool": {Pool: "demo"}} {
		anc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		a, err := audit.New(anc, audit.WithPageSize(16))
		if err != nil {
			t.Fatal(err)
		}
		var atFirst uint64
		next := int64(0)
		st, err := a.Replay(testCtx(t), q, func(r audit.Record) error {
			if r.Kind != audit.KindFrame {
				return nil
			}
			if next == 0 {
				atFirst = anc.Stats().InBytes
			}
			if r.Sequence == nil || *r.Sequence != next {
				t.Fatalf("%s: frame %v printed where %d was expected", name, r.Sequence, next)
			}
			next++
			return nil
		})
		anc.Close()
		if err != nil || st.Complete != 1 || st.Violations != 0 || next != n {
			t.Fatalf("%s: %d frames printed, stats %+v, %v", name, next, st, err)
		}
		if atFirst > uint64(stored)/2 {
			t.Errorf("%s: the first frame was printed after %d KiB were read, of the request's %d KiB: not as its frames are read", name, atFirst>>10, stored>>10)
		}
	}
}

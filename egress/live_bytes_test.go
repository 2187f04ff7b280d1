package egress

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/render"
)

// liveHeld is what the live channel of r holds now, in bytes (data and
// headers); its messages are put back in order.
func liveHeld(r *Reader) int {
	held := 0
	ms := make([]*nats.Msg, 0, len(r.live))
	for len(r.live) > 0 {
		m := <-r.live
		held += len(m.Data)
		for k, vs := range m.Header {
			for _, v := range vs {
				held += len(k) + len(v)
			}
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		r.live <- m
	}
	return held
}

// TestStalledReaderLiveBytesBounded: a reader whose client stopped reading
// (its stream blocked in a write, Next not called) while the agent stores
// large messages holds at most DefaultLiveBytes of them in its live
// buffer, whatever the server's max_payload (8 MB in deploy/nats); what
// the buffer could not hold is read again from the stream, every frame
// once, in order. So does the subscription a call made before its publish
// (Service.Prepare). The buffer was bounded in messages only: 64 of them,
// up to 512 MiB under an 8 MB max_payload, held for as long as the client
// crawled.
func TestStalledReaderLiveBytesBounded(t *testing.T) {
	e := startEnv(t, envOpts{maxPayload: 8 << 20})
	svc := newService(t, e)
	for _, prepared := range []bool{false, true} {
		t.Run(map[bool]string{false: "open", true: "prepared"}[prepared], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id := fmt.Sprintf("req_live_bytes_%t", prepared)
			env := newEnvelope(id)
			if prepared {
				var p *Prepared
				ctx, p = preparedCall(t, svc, id)
				e.submit(t, env)
				p.Published(false) // published on another connection
			} else {
				e.submit(t, env)
			}
			w := e.writer(t, env)
			r, err := svc.open(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			const frames, size = 8, 3 << 20
			for i := range frames {
				w.text(strings.Repeat(string(rune('a'+i)), size))
			}
			w.complete("done")
			// Every live message has come: in the buffer, or dropped.
			testkit.Eventually(t, 20*time.Second, "the live messages delivered", func() bool {
				got, _ := r.sub.Delivered()
				dropped, _ := r.sub.Dropped()
				return got+int64(dropped) == frames+1
			})
			if held := liveHeld(r); held > DefaultLiveBytes {
				t.Errorf("the stalled reader's live buffer holds %d MiB (%d messages), more than DefaultLiveBytes (%d MiB)", held>>20, len(r.live), DefaultLiveBytes>>20)
			}
			n := readChecked(t, ctx, r, func(f render.Frame) {
				if s := f.Sequence(); s < frames && !strings.Contains(string(f.Response.Body), strings.Repeat(string(rune('a'+s)), 64)) {
					t.Fatalf("frame %d is not its text", s)
				}
			})
			if n != frames+1 {
				t.Fatalf("read %d frames, want %d", n, frames+1)
			}
		})
	}
}

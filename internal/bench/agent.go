package bench

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Pool is the agent pool the in-process pipeline runs the bench agent on
// (and the default pool of its ingress).
const Pool = "bench"

// Agent returns the bench agent: for every request it writes frames-1
// e2a.chunk text frames of frameBytes bytes each, then a final e2a.complete
// frame, waiting delay before each frame after the first. Every frame is
// written with Writer.Write, so none is coalesced and a request has exactly
// frames frames. Request params frames, frame_bytes and delay_ms override
// the defaults, so a remote pool running this agent can be driven too.
func Agent(frames, frameBytes int, delay time.Duration) agent.Handler {
	return benchAgent{frames: max(frames, 1), frameBytes: max(frameBytes, 1), delay: delay}
}

type benchAgent struct {
	frames, frameBytes int
	delay              time.Duration
}

// Resumable: the output is a pure function of the request.
func (benchAgent) Resumable() bool { return true }

func (a benchAgent) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	frames := int(min(max(env.ParamInt("frames", int64(a.frames)), 1), 10000))
	size := int(min(max(env.ParamInt("frame_bytes", int64(a.frameBytes)), 1), 1<<20))
	delay := time.Duration(min(max(env.ParamInt("delay_ms", a.delay.Milliseconds()), 0), 60000)) * time.Millisecond
	if _, ok := env.Params["delay_ms"]; !ok {
		delay = a.delay
	}
	text := payload(size)
	resume := w.ResumeAfter()
	for i := 0; i < frames-1; i++ {
		if int64(i) <= resume {
			continue
		}
		if i > 0 && delay > 0 {
			if err := sleepctx.SleepCause(ctx, delay); err != nil {
				return err
			}
		}
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}, false); err != nil {
			return err
		}
	}
	if delay > 0 && frames > 1 {
		if err := sleepctx.SleepCause(ctx, delay); err != nil {
			return err
		}
	}
	return w.Complete(map[string]any{"content": "done"})
}

var (
	payloadMu sync.Mutex
	payloads  = map[int]string{}
)

// payload returns n bytes of lowercase text, built once per size.
func payload(n int) string {
	payloadMu.Lock()
	defer payloadMu.Unlock()
	if s, ok := payloads[n]; ok {
		return s
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz "
	var b strings.Builder
	b.Grow(n)
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[i%len(alphabet)])
	}
	s := b.String()
	if len(payloads) < 64 {
		payloads[n] = s
	}
	return s
}

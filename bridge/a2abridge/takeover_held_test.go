package a2abridge_test

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacysrv "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// gatedV03 is slowV03's chunks (at once, not every interval) that, after
// its first `before` chunks, says nothing until release is closed, then
// sends the rest.
type gatedV03 struct {
	slowV03
	before  int
	release chan struct{}
}

func (e gatedV03) Execute(ctx context.Context, rc *legacysrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		if err := q.Write(ctx, legacy.NewStatusUpdateEvent(rc, legacy.TaskStateSubmitted, nil)); err != nil {
			return err
		}
	}
	for i := 1; i <= e.chunks; i++ {
		if i == e.before+1 {
			select {
			case <-e.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ev := legacy.NewArtifactUpdateEvent(rc, legacy.ArtifactID(up.SlowArtifact), legacy.TextPart{Text: up.SlowChunk(i)})
		ev.Append = i > 1
		if err := q.Write(ctx, ev); err != nil {
			return err
		}
	}
	done := legacy.NewStatusUpdateEvent(rc, legacy.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

// heldHeaders answers a stream (Accept: text/event-stream) with its
// headers only once its first event is written, as the Java SDK 0.3's
// server does (and the Python SDK's, a2aupstream.WirePython).
type heldHeaders struct {
	http.ResponseWriter
	status int
	sent   bool
}

func (h *heldHeaders) WriteHeader(s int) { h.status = s }

func (h *heldHeaders) Write(b []byte) (int, error) {
	if !h.sent {
		h.sent = true
		h.ResponseWriter.WriteHeader(cmp.Or(h.status, http.StatusOK))
	}
	return h.ResponseWriter.Write(b)
}

func (h *heldHeaders) Flush() {
	if h.sent {
		h.ResponseWriter.(http.Flusher).Flush()
	}
}

// TestTakeoverV03AgentSilentHeldHeaders: a v0.3 agent that sends no task
// snapshot on tasks/resubscribe and holds the stream's headers until its
// next event (the Java SDK 0.3), silent for longer than the idle timeout
// when the worker serving the request dies. The worker taking it over
// reads the task and polls it (logged), and the answer completes whole
// once the agent goes on. Each re-subscription met the same silence and
// timed out, and after three the request failed upstream_timeout while the
// agent's task ran on.
func TestTakeoverV03AgentSilentHeldHeaders(t *testing.T) {
	t.Parallel()
	const chunks, before = 8, 3
	release := make(chan struct{})
	var gets atomic.Int64
	rpc := legacysrv.NewJSONRPCHandler(legacysrv.NewHandler(gatedV03{slowV03{chunks: chunks}, before, release}))
	url := startV03Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			w = &heldHeaders{ResponseWriter: w}
		} else {
			gets.Add(1) // tasks/get (and the bridge's start check)
		}
		rpc.ServeHTTP(w, r)
	}))
	tk := startTakeover(t, url)
	turn := up.NewTurn()
	// Killed once the client saw the first chunks (the pipeline may write
	// the three as one event), while the agent is silent.
	tk.killAfter(t, turn, 1)
	getsBefore := gets.Load()
	h, log := newLoggedHandler(t, tk.p, "agent", url, bridge.WithIdleTimeout(200*time.Millisecond))
	tk.serve(t, h)
	testkit.Eventually(t, 10*time.Second, "the taking worker reading the task", func() bool { return gets.Load() > getsBefore+1 })
	close(release)
	tk.finish(t, turn)
	a := stored(t, tk.p)
	if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
		t.Fatalf("the takeover ended the request with %+v\n%s", f, log.String())
	}
	if got := a.Text(e2a.DeltaText); got != slowText(chunks) {
		t.Errorf("stored text after the takeover: %q, want %q", got, slowText(chunks))
	}
	if got := turn.Text(up.SlowArtifact); got != slowText(chunks) || turn.State() != a2a.TaskStateCompleted {
		t.Errorf("the client's answer after the takeover: %s, %q", turn.State(), got)
	}
	if !strings.Contains(log.String(), "sent nothing within the idle timeout") {
		t.Errorf("the fallback to polling is not logged:\n%s", log.String())
	}
}

// Command peer is the A2A reference server `e2a bench --peer a2a-go`
// measures the pipeline against: the official a2a-go SDK's JSON-RPC server
// (v0.3.3, the fastest a2a-go on this workload, hence a module of its own:
// the pipeline's module needs v0.3.15 for a2a-go/v2), in memory, no broker
// and no durability, with an agent that streams what the bench agent does.
//
// For message/stream the agent writes the task (submitted), -frames minus 1
// artifact chunks of -frame-bytes bytes of text, an empty last chunk and
// the completed status, final: as many events, of the same size, as the
// pipeline's answer to the bench agent with the same flags.
//
// It listens on 127.0.0.1:0 (or -addr), prints "listening http://ADDR" on
// stdout, serves JSON-RPC at /a2a and its allocation count at /allocs
// (runtime.MemStats.Mallocs) for the bench's per-request figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

type agent struct{ frames, size int }

func (a agent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	frames, size := a.frames, a.size
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	text := strings.Repeat("x", size)
	id := a2a.NewArtifactID()
	for i := 0; i < frames-1; i++ {
		ev := a2a.NewArtifactUpdateEvent(rc, id, a2a.TextPart{Text: text})
		ev.Append = i > 0
		if err := q.Write(ctx, ev); err != nil {
			return err
		}
	}
	last := a2a.NewArtifactUpdateEvent(rc, id)
	last.Append, last.LastChunk = true, true
	if err := q.Write(ctx, last); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (agent) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	frames := flag.Int("frames", 8, "frames of the equivalent pipeline answer (chunks + final)")
	size := flag.Int("frame-bytes", 100, "bytes of text per chunk")
	flag.Parse()
	mux := http.NewServeMux()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent{frames: *frames, size: *size})))
	mux.HandleFunc("/allocs", func(w http.ResponseWriter, _ *http.Request) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		_ = json.NewEncoder(w).Encode(map[string]uint64{"mallocs": m.Mallocs, "total_alloc": m.TotalAlloc})
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "listening http://%s\n", ln.Addr())
	log.Fatal((&http.Server{Handler: mux}).Serve(ln))
}

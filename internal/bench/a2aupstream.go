package bench

import (
	"context"
	"fmt"
	"iter"
	"net"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// A2AUpstream is an A2A v1.0 agent on a loopback port, in this process:
// the official a2a-go/v2 server (a2asrv, its in-memory task store) over
// the JSON-RPC binding at PathA2AV1, its agent card (streaming) at
// /.well-known/agent-card.json. Every message starts a task whose stream
// is the Task (submitted), Chunks artifact updates of ChunkBytes bytes of
// text (one artifact, appended to, the last marked lastChunk), Delay apart
// when set, and the completed status: the answer of a streaming model
// agent written with the SDK. It stands for the upstream in `e2a bench
// --bridge a2a`, called directly by the load generator (A2A v1.0
// SendStreamingMessage) and through the A2A bridge alike. Its goroutines
// carry the profiler label bench=upstream.
type A2AUpstream struct {
	// URL is the server's base URL (its card's, http://127.0.0.1:PORT).
	URL string

	srv *http.Server
}

// StartA2AUpstream starts the agent: chunks artifact chunks of chunkBytes
// bytes of text per answer, delay between them.
func StartA2AUpstream(chunks, chunkBytes int, delay time.Duration) (*A2AUpstream, error) {
	if chunks < 1 || chunkBytes < 1 || delay < 0 {
		return nil, fmt.Errorf("bench: upstream of %d chunks of %d bytes, delay %v (want ≥ 1, ≥ 1, ≥ 0)", chunks, chunkBytes, delay)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &A2AUpstream{URL: "http://" + ln.Addr().String()}
	card := &a2a.AgentCard{
		Name:                "bench-a2a",
		Description:         "e2a bench's A2A agent: a text artifact in chunks",
		Version:             "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(u.URL+PathA2AV1, a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain"},
		Skills:              []a2a.AgentSkill{{ID: "chunks", Name: "chunks", Description: "answers in chunks", Tags: []string{"bench"}}},
	}
	ex := &chunkExecutor{chunks: chunks, text: payload(chunkBytes), delay: delay}
	mux := http.NewServeMux()
	mux.Handle(PathA2AV1, a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(ex)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	u.srv = serveUpstream(ln, mux)
	return u, nil
}

// Close stops the server.
func (u *A2AUpstream) Close() { shutdownUpstream(u.srv) }

// chunkExecutor is A2AUpstream's agent.
type chunkExecutor struct {
	chunks int
	text   string
	delay  time.Duration
}

var _ a2asrv.AgentExecutor = (*chunkExecutor)(nil)

// artifactID is the id of A2AUpstream's one artifact.
const artifactID a2a.ArtifactID = "answer"

func (e *chunkExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		for i := range e.chunks {
			if i > 0 && e.delay > 0 && sleepctx.SleepCause(ctx, e.delay) != nil {
				return
			}
			ev := a2a.NewArtifactUpdateEvent(ec, artifactID, a2a.NewTextPart(e.text))
			ev.Append, ev.LastChunk = i > 0, i == e.chunks-1
			if !yield(ev, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (e *chunkExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

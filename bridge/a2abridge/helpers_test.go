package a2abridge_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacysrv "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/streams"
)

// newHandler is the bridge of pool to the A2A agent at url, with its
// conversations on p.
func newHandler(t *testing.T, p *pipetest.Pipeline, pool, url string, copts ...bridge.ClientOption) *bridge.Handler {
	t.Helper()
	return newRetryingHandler(t, p, pool, url, bridge.WithRetry(2, 5*time.Millisecond, 20*time.Millisecond), copts...)
}

// newRetryingHandler is newHandler with the bridge's retry option retry.
func newRetryingHandler(t *testing.T, p *pipetest.Pipeline, pool, url string, retry bridge.Option, copts ...bridge.ClientOption) *bridge.Handler {
	t.Helper()
	return handlerWith(t, p, pool, url, retry, nil, copts...)
}

// newLoggedHandler is newHandler whose A2A bridge logs into the buffer
// returned.
func newLoggedHandler(t *testing.T, p *pipetest.Pipeline, pool, url string, copts ...bridge.ClientOption) (*bridge.Handler, *testkit.Buffer) {
	t.Helper()
	log := &testkit.Buffer{}
	return handlerWith(t, p, pool, url, bridge.WithRetry(2, 5*time.Millisecond, 20*time.Millisecond),
		[]a2abridge.Option{a2abridge.WithLogger(slog.New(slog.NewTextHandler(log, nil)))}, copts...), log
}

// handlerWith is newRetryingHandler with the A2A bridge's options opts
// too.
func handlerWith(t *testing.T, p *pipetest.Pipeline, pool, url string, retry bridge.Option, opts []a2abridge.Option, copts ...bridge.ClientOption) *bridge.Handler {
	t.Helper()
	ctx := context.Background()
	client, err := bridge.NewClient(url, copts...)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := bridge.OpenConversations(ctx, p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]a2abridge.Option{a2abridge.WithConversations(pool, conv), a2abridge.WithPollInterval(20 * time.Millisecond)}, opts...)
	up, err := a2abridge.New(ctx, client, opts...)
	// The start reads the agent's card under the client's idle timeout,
	// which some tests make a few hundred milliseconds: on a loaded machine
	// the card can take longer (seen: a 200 ms one timed out), which is
	// not what they test.
	for try := 1; errors.Is(err, bridge.ErrIdleTimeout) && try < 3; try++ {
		t.Logf("the bridge's start, try %d: %v", try, err)
		up, err = a2abridge.New(ctx, client, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	h, err := bridge.New(pool, up, retry)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// bridgePool serves pool on p from the agent at url.
func bridgePool(t *testing.T, p *pipetest.Pipeline, pool, url string, opts ...agent.Option) {
	t.Helper()
	p.Pool(pool, newHandler(t, p, pool, url), opts...)
}

// v1Client is the a2a-go/v2 client of pool's card.
func v1Client(t *testing.T, p *pipetest.Pipeline, pool string) *a2aclient.Client {
	t.Helper()
	return up.Client(t, p.URL+"/pools/"+pool)
}

// taskText is the text of a task's artifacts (thoughts left out) and the
// text of its status message.
func taskText(task *a2a.Task) (artifacts, status string) {
	var b strings.Builder
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			if th, _ := p.Metadata["thought"].(bool); !th {
				b.WriteString(p.Text())
			}
		}
	}
	if task.Status.Message != nil {
		for _, p := range task.Status.Message.Parts {
			status += p.Text()
		}
	}
	return b.String(), status
}

// executionOf is the upstream task of srv's turn that received text, and
// whether that turn continued the task.
func executionOf(srv *up.Server, text string) (task string, continued bool) {
	for _, e := range srv.Executions() {
		if e.Message != nil && up.TextOf(e.Message.Parts) == text {
			return string(e.TaskID), e.Continued
		}
	}
	return "", false
}

// startV1 serves exec on a2a-go/v2's JSON-RPC server with a v1.0 card
// (serveA2A).
func startV1(t *testing.T, exec a2asrv.AgentExecutor) (url string, h a2asrv.RequestHandler) {
	t.Helper()
	h = a2asrv.NewHandler(exec)
	return serveA2A(t, h), h
}

// startV03 serves exec on a2a-go v0.3.15's JSON-RPC server with a v0.3
// card; it returns the card's base URL.
func startV03(t *testing.T, exec legacysrv.AgentExecutor) string {
	t.Helper()
	return startV03Card(t, exec, legacysrv.WellKnownAgentCardPath, "0.3.0")
}

// startV03Card is startV03 with the card served at cardPath only, naming
// protocol version.
func startV03Card(t *testing.T, exec legacysrv.AgentExecutor, cardPath, version string) string {
	t.Helper()
	return startV03At(t, legacysrv.NewJSONRPCHandler(legacysrv.NewHandler(exec)), cardPath, version)
}

// startV03Handler is startV03 with rpc (a v0.3 JSON-RPC handler) serving
// the agent's interface.
func startV03Handler(t *testing.T, rpc http.Handler) string {
	t.Helper()
	return startV03At(t, rpc, legacysrv.WellKnownAgentCardPath, "0.3.0")
}

// startV03At serves rpc at /rpc and, at cardPath, a v0.3 card naming it
// and protocol version.
func startV03At(t *testing.T, rpc http.Handler, cardPath, version string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	card := &legacy.AgentCard{
		Name: "slow v0.3", Description: "a2a-go v0.3.15 agent", Version: "1.0.0",
		URL: base + "/rpc", PreferredTransport: legacy.TransportProtocolJSONRPC, ProtocolVersion: version,
		Capabilities:       legacy.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills:             []legacy.AgentSkill{{ID: "slow", Name: "slow", Description: "slow", Tags: []string{"test"}}},
	}
	mux := http.NewServeMux()
	mux.Handle("/rpc", rpc)
	mux.Handle(cardPath, legacysrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base
}

// saidText is the text of frames in their order: their text deltas and
// the text of their status-updates' messages (statusParts).
func saidText(t *testing.T, frames []*e2a.Response) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
			b.WriteString(c.Delta.(string))
		}
		for _, p := range statusParts(t, []*e2a.Response{f}) {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// statusParts is the parts of the messages of the agent's status-updates
// among frames (non-final a2a.stream_event status_update frames: the
// bridge's of an agent's working status), in A2A v1.0, in order.
func statusParts(t *testing.T, frames []*e2a.Response) []*a2a.Part {
	t.Helper()
	var parts []*a2a.Part
	for _, f := range frames {
		old, err := a2amap.NativeEvent(f)
		if err != nil {
			t.Fatalf("frame %d: %v", f.Sequence, err)
		}
		su, ok := old.(*legacy.TaskStatusUpdateEvent)
		if !ok || f.IsFinal || su.Status.Message == nil {
			continue
		}
		ev, err := a2av0.ToV1Event(su)
		if err != nil {
			t.Fatalf("frame %d: %v", f.Sequence, err)
		}
		parts = append(parts, ev.(*a2a.TaskStatusUpdateEvent).Status.Message.Parts...)
	}
	return parts
}

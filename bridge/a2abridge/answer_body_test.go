package a2abridge_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// hugeAnswerer is a JSON-RPC A2A agent (no streaming) whose SendMessage
// answer is one message of size bytes of text, or an endless one
// (size < 0), in 32 KiB writes; it counts the calls, the bytes written and
// the handlers that ended. With dataLines (a streaming agent) it answers
// an event stream whose one event never ends: data lines of 32 KiB, no
// blank line, size bytes of them (size ≥ 0).
type hugeAnswerer struct {
	size           int
	dataLines      bool
	calls, written atomic.Int64
	ended          chan struct{}
}

func (h *hugeAnswerer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() { h.ended <- struct{}{} }()
	h.calls.Add(1)
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	write := func(s string) bool {
		n, err := w.Write([]byte(s))
		h.written.Add(int64(n))
		return err == nil
	}
	if h.dataLines {
		w.Header().Set("Content-Type", "text/event-stream")
		line := "data: " + strings.Repeat("x", 32<<10) + "\n"
		for n := 0; n < h.size && write(line); n += len(line) {
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if h.size >= 0 {
		msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(strings.Repeat("x", h.size)))
		result, err := json.Marshal(a2a.StreamResponse{Event: msg})
		if err != nil {
			panic(err)
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": json.RawMessage(result)})
		for len(body) > 0 && write(string(body[:min(32<<10, len(body))])) {
			body = body[min(32<<10, len(body)):]
		}
		return
	}
	chunk := strings.Repeat("x", 32<<10)
	if write(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"`) {
		for write(chunk) {
		}
	}
}

// serve serves h at /rpc of a JSON-RPC card (streaming with dataLines)
// until t ends, and returns the card's base URL. A small send buffer:
// what the agent wrote is what the bridge read, give or take the sockets'
// buffers.
func (h *hugeAnswerer) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/rpc", h)
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(
		testCard(a2a.NewAgentInterface(base+"/rpc", a2a.TransportProtocolJSONRPC), h.dataLines)))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(smallSendBuffer{ln.(*net.TCPListener)}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base
}

// TestHugeJSONAnswer: an A2A agent whose answer to SendMessage is a JSON
// document larger than the client's body bound (bridge.WithMaxBodyBytes,
// 64 KiB here), or one that never ends, ends the request
// upstream_protocol_error, not retryable, after one call, naming the
// bound, and the agent's connection is closed once the bound is passed:
// a2a-go reads such an answer whole, so the bridge held all of it (an
// endless one until the worker ran out of memory), its answer bound
// counting only the frames written after; a finite one was taken.
func TestHugeJSONAnswer(t *testing.T) {
	t.Parallel()
	const bound = 64 << 10
	for _, c := range []struct {
		name string
		size int
	}{{"finite", 4 << 20}, {"endless", -1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			refusedPastBound(t, &hugeAnswerer{size: c.size, ended: make(chan struct{}, 4)})
		})
	}
}

// TestEndlessEventOfDataLines: an A2A agent whose event stream sends
// one event that never ends (data lines, each under a2a-go's 10 MB bound
// on a line, and no blank line) ends the request upstream_protocol_error,
// not retryable, once the event passes the client's body bound
// (bridge.WithMaxBodyBytes, 64 KiB here), after one call, the agent's
// connection closed. a2a-go joins an event's data lines with no bound on
// their sum, so the bridge held the whole event in the worker's memory:
// the idle timeout never fires while lines come, and the answer bound
// counts only frames written.
func TestEndlessEventOfDataLines(t *testing.T) {
	t.Parallel()
	// 16 MiB of lines, then the answer ends: without a bound on the event,
	// the bridge read them all (an endless agent held the test 60 s).
	refusedPastBound(t, &hugeAnswerer{size: 16 << 20, dataLines: true, ended: make(chan struct{}, 4)})
}

// refusedPastBound asks a pool bridged to agent with a body bound of 64
// KiB (bridge.WithMaxBodyBytes) and checks that the request ends
// upstream_protocol_error, not retryable, naming the bound, after one
// call, and that the agent's connection was closed once the bound was
// passed: its handler ends, having written the bound and the sockets'
// buffers at most.
func refusedPastBound(t *testing.T, agent *hugeAnswerer) {
	t.Helper()
	const bound = 64 << 10
	base := agent.serve(t)
	p := pipetest.Start(t)
	p.Pool("agent", newHandler(t, p, "agent", base, bridge.WithMaxBodyBytes(bound)))
	start := time.Now()
	a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
	code, retryable := a.ErrorCode()
	var msg string
	if f := a.Final(); f != nil && f.ResponseKind == e2a.KindError {
		b, _ := f.Error()
		msg = b.Message
	}
	if code != "upstream_protocol_error" || retryable || !strings.Contains(msg, "larger than 65536 bytes") {
		t.Fatalf("final frame %s (%s, retryable %v: %q), want upstream_protocol_error, not retryable, naming the bound",
			kindOf(a.Final()), code, retryable, msg)
	}
	if n := agent.calls.Load(); n != 1 {
		t.Fatalf("%d calls of the agent, want 1 (not retried)", n)
	}
	select {
	case <-agent.ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent still writes its answer (%d bytes) %v after the request ended", agent.written.Load(), time.Since(start))
	}
	if n := agent.written.Load(); n > 1<<20 {
		t.Fatalf("the agent wrote %d bytes of its answer, want the bound (%d) and the sockets' buffers", n, bound)
	}
	t.Logf("the agent wrote %d bytes; request ended in %v", agent.written.Load(), time.Since(start))
}

// smallSendBuffer accepts connections with a 64 KiB send buffer.
type smallSendBuffer struct{ *net.TCPListener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err == nil {
		_ = c.SetWriteBuffer(64 << 10)
	}
	return c, err
}

package ingress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/nats-io/nats-server/v2/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// goneAgent answers a text starting "hold" once released (taken is told
// the request reached it), one starting heldText once given a token of
// its own (taken told too), anything else at once with many frames.
type goneAgent struct {
	taken   chan string
	release chan struct{}
	tokens  chan struct{} // one per request of heldText to answer
	once    sync.Once
	frames  int
	size    int
	done    atomic.Int64
}

func newGoneAgent(frames, size int) *goneAgent {
	return &goneAgent{taken: make(chan string, 64), release: make(chan struct{}), tokens: make(chan struct{}, 64), frames: frames, size: size}
}

func (g *goneAgent) let() { g.once.Do(func() { close(g.release) }) }

func (g *goneAgent) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	text := demo.Text(env)
	if strings.HasPrefix(text, heldText) {
		g.taken <- env.RequestID
		select {
		case <-g.tokens:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else if strings.HasPrefix(text, "hold") {
		g.taken <- env.RequestID
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	frames, size := g.frames, g.size
	trickle := strings.HasPrefix(text, trickleText)
	if trickle {
		// As many bytes in frames a quarter the size: each fits the
		// server's response buffer, and waits in the flush that follows.
		frames, size = 4*frames, size/4
	}
	piece := strings.Repeat("x", size)
	for i := 0; i < frames; i++ {
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, map[string]any{"delta_kind": "text", "delta": fmt.Sprintf("%d:%s", i, piece)}, false); err != nil {
			return err
		}
		if trickle {
			if err := w.Sync(); err != nil {
				return err
			}
		}
	}
	err := w.Complete("done")
	g.done.Add(1)
	return err
}

// goneDoor opens a streaming call on one front door and returns once its
// answer started (HTTP: the status line; gRPC: the stream made); first
// reads until the first frame is in.
type goneDoor struct {
	name  string
	whole bool // answers once, at the request's end (first: the answer)
	open  func(ctx context.Context, t *testing.T, p *pipetest.Pipeline, text string) (first func() error, stop func())
}

// slowText marks a call whose client reads through a small window
// (smallWindowDialer; gRPC: no window growth).
const slowText = "slow"

// heldText marks a request the agent answers (as any other) once given a
// token of its own (goneAgent.tokens).
const heldText = "held"

// trickleText marks a slow call (slowText) whose agent writes 4 times as
// many frames a quarter the size, one at a time, each stored before the
// next is written: the stream writes each frame, then flushes it, and
// its client's stop is met by a flush.
const trickleText = slowText + "trickle"

func goneHTTP(name, path, accept string, body func(text string) string, hdr ...string) goneDoor {
	return goneDoor{name: name, open: func(ctx context.Context, t *testing.T, p *pipetest.Pipeline, text string) (func() error, func()) {
		tr := &http.Transport{DisableKeepAlives: true}
		if strings.HasPrefix(text, slowText) {
			tr.DialContext = smallWindowDialer().DialContext
		}
		ctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, strings.NewReader(body(text)))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		// The call runs on its own: an answer given whole comes at the
		// request's end only.
		type answer struct {
			resp *http.Response
			err  error
		}
		answered := make(chan answer, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Do(req)
			answered <- answer{resp, err}
		}()
		var resp *http.Response
		first := func() error {
			a := testkit.Receive(t, answered, time.Minute, "%s: the answer", name)
			if a.err != nil {
				return a.err
			}
			resp = a.resp
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if strings.Contains(line, "xxxxxxxx") {
					return nil
				}
				if err != nil {
					return err
				}
			}
		}
		return first, func() {
			cancel()
			if resp != nil {
				resp.Body.Close()
			}
			tr.CloseIdleConnections()
		}
	}}
}

func goneGRPC() goneDoor {
	return goneDoor{name: "grpc", open: func(ctx context.Context, t *testing.T, p *pipetest.Pipeline, text string) (func() error, func()) {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if strings.HasPrefix(text, slowText) {
			d := smallWindowDialer()
			opts = append(opts, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10), grpc.WithReadBufferSize(0),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
		}
		conn, err := grpc.NewClient(p.GRPCAddr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() }) // stop resets the call's HTTP/2 stream alone
		ctx, cancel := context.WithCancel(ctx)
		st, err := a2apb.NewA2AServiceClient(conn).SendStreamingMessage(ctx, grpcProtoMsg("m-"+text, text))
		if err != nil {
			t.Fatalf("grpc: %v", err)
		}
		first := func() error {
			for {
				r, err := st.Recv()
				if err != nil {
					return err
				}
				if strings.Contains(r.String(), "xxxxxxxx") {
					return nil
				}
			}
		}
		return first, cancel
	}}
}

func goneDoors() []goneDoor {
	e2aBody := func(text string) string { return `{"params":{"text":"` + text + `"}}` }
	v1Msg := func(text string) string {
		return `{"message":{"role":"ROLE_USER","messageId":"m-` + text + `","parts":[{"text":"` + text + `"}]}}`
	}
	return []goneDoor{
		goneHTTP("e2a-sse", "/v1/requests", "text/event-stream", e2aBody),
		goneHTTP("e2a-ndjson", "/v1/requests", "application/x-ndjson", e2aBody),
		goneHTTP("a2av1-jsonrpc", "/a2a/v1", "text/event-stream", func(text string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":` + v1Msg(text) + `}`
		}, "A2A-Version", "1.0"),
		{name: "e2a-json", whole: true, open: goneHTTP("e2a-json", "/v1/requests?wait=true", "", e2aBody).open},
		{name: "a2av1-send", whole: true, open: goneHTTP("a2av1-send", "/a2a/v1", "", func(text string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + v1Msg(text) + `}`
		}, "A2A-Version", "1.0").open},
		{name: "a2a-v03-send", whole: true, open: goneHTTP("a2a-v03-send", "/a2a", "", func(text string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","kind":"message","messageId":"m-` +
				text + `","parts":[{"kind":"text","text":"` + text + `"}]}}}`
		}).open},
		goneHTTP("a2av1-rest", "/a2a/v1/message:stream", "text/event-stream", v1Msg, "A2A-Version", "1.0"),
		goneGRPC(),
		goneHTTP("a2a-v03", "/a2a", "text/event-stream", func(text string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"role":"user","kind":"message","messageId":"m-` +
				text + `","parts":[{"kind":"text","text":"` + text + `"}]}}}`
		}),
		{name: "acp", open: func(ctx context.Context, t *testing.T, p *pipetest.Pipeline, text string) (func() error, func()) {
			sid := acpNewSession(t, p.URL, "")
			return goneHTTP("acp", "/acp", "application/x-ndjson", func(text string) string { return promptBody("1", sid, text, false) }).open(ctx, t, p, text)
		}},
		goneHTTP("a2e", "/a2e", "application/x-ndjson", func(text string) string {
			return `{"a2e":"1.0","id":"h1","type":"handshake/req","ts":1716123456.789}
{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-` + text + `","text":"` + text + `"}
`
		}),
	}
}

// pipelineStacks counts the goroutines and returns the stacks of those
// running the pipeline's code outside the agent runtime and the tests, and
// outside the task records' keeper (keepRecords: it runs from the
// server's start until its connection is closed, and its rounds, a
// minute apart, read what it keeps and the keeper list).
func pipelineStacks() (int, string) {
	return testkit.Goroutines(func(g string) bool {
		return strings.Contains(g, "e2a-pipeline/pipeline/") && !strings.Contains(g, "pipeline/agent.") && !strings.Contains(g, "_test.") &&
			!strings.Contains(g, "ingress.(*Server).keepRecords")
	})
}

// goneRun is a pipeline whose pool "demo" is a goneAgent, every door
// warmed up, and the baseline its checks come back to.
type goneRun struct {
	p          *pipetest.Pipeline
	g          *goneAgent
	ns         *server.Server
	ctx        context.Context
	base, subs int            // the pipeline's goroutines, the server's subscriptions
	subjects   map[string]int // the baseline's subscriptions by subject (serverSubs)
}

// serverSubs counts ns's subscriptions by subject, each client's inbox
// subjects by their client's name and the inbox's first tokens.
func serverSubs(t *testing.T, ns *server.Server) map[string]int {
	t.Helper()
	sz, err := ns.Subsz(&server.SubszOptions{Subscriptions: true, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, d := range sz.Subs {
		by[d.Subject+" (client "+strconv.FormatUint(d.Cid, 10)+")"]++
	}
	return by
}

// subscribedDiff names the subscriptions of now that base does not hold.
func subscribedDiff(base, now map[string]int) string {
	var more []string
	for k, n := range now {
		if n > base[k] {
			more = append(more, fmt.Sprintf("%s ×%d", k, n-base[k]))
		}
	}
	slices.Sort(more)
	return strings.Join(more, "\n")
}

// startGone starts the pipeline (opts are pipetest.Start's), its agent
// answering frames of size bytes, opens a stream on every door and reads
// its first frame (the subscriptions a first answer makes stay), and
// takes the baseline once it holds still.
//
// The first frame is enough: a task's stream that reaches its final frame
// reads the turn its record lists next (LaterTurn) on the task store's
// reply inbox, which the store subscribes when it is made
// (NewTaskStore). It was subscribed at that first read, which a warm-up
// whose clients left after the first frame did not always reach: the
// baseline then lacked it, and a later stream that reached its end was
// "107 subscriptions (106 before)", an _INBOX.<id>.* of the pipeline's
// connection.
func startGone(t *testing.T, frames, size int, opts ...pipetest.Option) *goneRun {
	srv, nc := natstest.RunServer(t)
	r := &goneRun{p: pipetest.Start(t, append([]pipetest.Option{pipetest.WithConn(nc), pipetest.WithGRPC()}, opts...)...),
		g: newGoneAgent(frames, size), ns: srv.Server()}
	r.p.Pool("demo", r.g)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	for _, d := range goneDoors() {
		first, stop := d.open(ctx, t, r.p, "warm"+d.name)
		if err := first(); err != nil {
			t.Fatalf("%s warm-up: %v", d.name, err)
		}
		stop()
	}
	r.answered(t, int64(len(goneDoors())))
	// Settled: the same counts for a second. Two equal reads in a row may
	// take a dip (a subscription made again: a watcher's or consumer's
	// reset under load) as the baseline.
	var since time.Time
	testkit.Eventually(t, 60*time.Second, "a settled baseline", func() bool {
		b, _ := pipelineStacks()
		s := int(r.ns.NumSubscriptions())
		if b != r.base || s != r.subs || since.IsZero() {
			r.base, r.subs, since = b, s, time.Now()
		}
		return time.Since(since) >= time.Second
	})
	r.subjects = serverSubs(t, r.ns)
	return r
}

// answered waits until the agent has answered n requests in all.
func (r *goneRun) answered(t *testing.T, n int64) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("%d answers written", n), func() bool { return r.g.done.Load() == n })
}

// released waits until the pipeline's goroutines and the server's
// subscriptions are back to the baseline, else fails naming what.
func (r *goneRun) released(t *testing.T, what string) {
	t.Helper()
	var n int
	var left string
	if !testkit.Until(20*time.Second, func() bool {
		n, left = pipelineStacks()
		return n <= r.base && int(r.ns.NumSubscriptions()) <= r.subs
	}) {
		// A subscription made again (the agent's pull: a new reply inbox
		// at each Fetch, every fetch wait when idle) is one beyond the
		// baseline in place of one no longer subscribed.
		now := serverSubs(t, r.ns)
		t.Fatalf("%s: still held: %d goroutines (%d before), %d subscriptions (%d before), subscribed beyond the baseline:\n%s\nno longer subscribed:\n%s\n%s",
			what, n, r.base, r.ns.NumSubscriptions(), r.subs, subscribedDiff(r.subjects, now), subscribedDiff(now, r.subjects), left)
	}
}

// TestClientGoneReleasesEverything: on every front door, a client that
// goes away mid-stream (TCP closed; gRPC: its call cancelled, an HTTP/2
// stream reset on a connection that stays), or before the first frame,
// leaves nothing behind on the server: no goroutine of the pipeline's
// code, no NATS subscription; and the request itself runs to its end.
func TestClientGoneReleasesEverything(t *testing.T) {
	r := startGone(t, 300, 2048)
	want := r.g.done.Load()
	for _, d := range goneDoors() {
		// Mid-stream: the first frame read, then gone.
		if !d.whole {
			first, stop := d.open(r.ctx, t, r.p, "mid"+d.name)
			if err := first(); err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			stop()
			want++
		}
		// Before the first frame: the agent holds the request.
		_, stop := d.open(r.ctx, t, r.p, "hold"+d.name)
		testkit.Receive(t, r.g.taken, 30*time.Second, d.name+": the held request taken")
		if n, _ := pipelineStacks(); n <= r.base {
			t.Fatalf("%s: a held stream shows %d goroutines of the pipeline (%d before): the check sees nothing", d.name, n, r.base)
		}
		stop()
		want++
	}
	r.g.let()
	r.answered(t, want)
	r.released(t, "the streams of clients gone")
}

// smallWindowDialer dials with a 4 KiB receive buffer: a client that stops
// reading has the server's writes wait at once.
func smallWindowDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
}

// TestSlowReaderCut: on every front door, a client that stops reading
// (its window full) while the agent writes fast is cut off after the
// write timeout: its stream's goroutines and subscriptions are released
// while the client still holds its connection, and the cut is counted.
// The gRPC binding held such a stream for as long as the connection lived
// (grpc-go's SendMsg waits for the client's window with no deadline).
//
// So it is when the agent writes its frames one at a time (trickleText),
// each flushed: the client's stop is met by a flush, whose error the A2A
// v1.0 JSON-RPC and A2E writers lost (they had Flush alone, which
// http.ResponseController takes for a flush that cannot fail): cut off
// all the same, those streams were counted client_gone, not slow.
func TestSlowReaderCut(t *testing.T) {
	r := startGone(t, 1500, 4096, pipetest.WithEgress(egress.WithWriteTimeout(300*time.Millisecond)))
	answered := r.g.done.Load()
	for _, text := range []string{slowText, trickleText} {
		before := slowCuts(t, r.p)
		for _, d := range goneDoors() {
			if d.whole {
				continue
			}
			first, stop := d.open(r.ctx, t, r.p, text+d.name)
			if err := first(); err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			// Stop reading: the agent writes 6 MiB.
			answered++
			r.answered(t, answered)
			r.released(t, d.name+": the slow reader's stream ("+text+")")
			stop()
		}
		// Each cut is counted as a slow client, the gRPC binding's too.
		slowCutCounted(t, r.p, before, map[string]float64{egress.FormatE2ASSE: 1, egress.FormatE2ANDJSON: 1, egress.FormatA2AV1SSE: 2,
			egress.FormatA2AV1GRPC: 1, egress.FormatA2ASSE: 1, egress.FormatACP: 1, egress.FormatA2ENDJSON: 1})
	}
}

// TestSlowReaderResumes: a client cut off as slow resumes its E2A stream
// from the last whole event it read (Last-Event-ID) and, with what it
// read before the cut, has every frame once, in order, to the final one.
func TestSlowReaderResumes(t *testing.T) {
	r := startGone(t, 1500, 4096, pipetest.WithEgress(egress.WithWriteTimeout(300*time.Millisecond)))
	tr := &http.Transport{DialContext: smallWindowDialer().DialContext}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(r.ctx, http.MethodPost, r.p.URL+"/v1/requests",
		strings.NewReader(`{"request_id":"slow-resume","params":{"text":"slow-resume"}}`))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	got, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	// Stop reading until the stream is cut.
	r.answered(t, r.g.done.Load()+1)
	r.released(t, "the slow reader's stream")
	rest, _ := io.ReadAll(br)
	read := got + string(rest)
	read = read[:strings.LastIndex(read, "\n\n")+2] // the whole events only
	before := testkit.Events(testkit.MustReadSSE(t, strings.NewReader(read)))
	if len(before) == 0 || strings.Contains(read, "e2a.complete") {
		t.Fatalf("the slow reader read %d events before the cut, the final one: %t", len(before), strings.Contains(read, "e2a.complete"))
	}
	last := before[len(before)-1].ID
	resumed := testkit.Open(t, http.MethodGet, r.p.URL+"/v1/requests/slow-resume/stream", "", "Last-Event-ID", last)
	after := testkit.Events(testkit.MustReadSSE(t, resumed.Body))
	all := append(before, after...)
	for i, ev := range all {
		if ev.ID != strconv.Itoa(i) {
			t.Fatalf("event %d has id %q (%d read before the cut, the last %s; %d after)", i, ev.ID, len(before), last, len(after))
		}
	}
	if n := len(all); n < 2 || all[n-1].Event != e2a.KindComplete {
		t.Fatalf("%d events, the last %+v", n, all[n-1].Event)
	}
	t.Logf("%d events before the cut, %d resumed after %s", len(before), len(after), last)
}

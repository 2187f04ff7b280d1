package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// slowHTTP sends a call whose client reads through a small window
// (smallWindowDialer) and returns its answer once its head came, its
// body unread; the connection stays open until the test ends.
func slowHTTP(t *testing.T, ctx context.Context, url, body, accept string, hdr ...string) *http.Response {
	t.Helper()
	resp, err := slowCall(ctx, url, body, accept, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// slowCall is slowHTTP's call, its errors returned.
func slowCall(ctx context.Context, url, body, accept string, hdr ...string) (*http.Response, error) {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: smallWindowDialer().DialContext}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return (&http.Client{Transport: tr}).Do(req)
}

// startTask sends text to the pool "demo" answered at once with its task
// (A2A v1.0 SendMessage with returnImmediately; v03: message/send, not
// blocking) and returns the task's id.
func startTask(t *testing.T, p *pipetest.Pipeline, text string, v03 bool) string {
	t.Helper()
	var resp *http.Response
	var sent struct {
		Result struct {
			ID   string
			Task struct{ ID string }
		}
	}
	if v03 {
		resp = testkit.Open(t, http.MethodPost, p.URL+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},`+
			`"message":{"role":"user","kind":"message","messageId":"m-`+text+`","parts":[{"kind":"text","text":"`+text+`"}]}}}`, "Content-Type", "application/json")
	} else {
		resp = testkit.Open(t, http.MethodPost, p.URL+"/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m-`+
			text+`","parts":[{"text":"`+text+`"}]},"configuration":{"returnImmediately":true}}}`, "Content-Type", "application/json", "A2A-Version", "1.0")
	}
	if err := json.NewDecoder(resp.Body).Decode(&sent); err != nil {
		t.Fatal(err)
	}
	if id := sent.Result.ID + sent.Result.Task.ID; id != "" {
		return id
	}
	t.Fatalf("%s: no task in the answer", text)
	return ""
}

// slowCutCounted checks that the slow clients cut since before were
// counted as want, by format.
func slowCutCounted(t *testing.T, p *pipetest.Pipeline, before, want map[string]float64) {
	t.Helper()
	cut := slowCuts(t, p)
	for f, n := range before {
		cut[f] -= n
		if cut[f] == 0 {
			delete(cut, f)
		}
	}
	if !maps.Equal(cut, want) {
		t.Errorf("slow clients counted %v, want %v", cut, want)
	}
}

// slowCuts is e2a_egress_slow_client_disconnects_total by format.
func slowCuts(t *testing.T, p *pipetest.Pipeline) map[string]float64 {
	cut := map[string]float64{}
	for _, s := range testkit.Series(t, p.Registry, "e2a_egress_slow_client_disconnects_total") {
		cut[s.Labels["format"]] += s.Value
	}
	return cut
}

// TestSlowSubscriberCut: a client that subscribes to a running task and
// stops reading (its window full) while the agent writes fast is cut off
// after the write timeout on every binding, its stream's goroutines and
// subscriptions released while it still holds its connection, and the cut
// counted. A v1.0 SubscribeToTask on JSON-RPC or HTTP+JSON (written by
// a2a-go's handler, not egress's renderers) held its stream, its read and
// its live subscription for as long as the connection lived.
func TestSlowSubscriberCut(t *testing.T) {
	var logs testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := startGone(t, 1500, 4096, pipetest.WithEgress(egress.WithWriteTimeout(300*time.Millisecond)),
		pipetest.WithIngress(ingress.WithLogger(log)))
	v1 := []string{"A2A-Version", "1.0"}
	firstLine := func(resp *http.Response) error {
		_, err := bufio.NewReader(resp.Body).ReadString('\n')
		return err
	}
	doors := []struct {
		name string
		v03  bool
		open func(id string) error // subscribes, reads the first event
	}{
		{name: "a2av1-jsonrpc", open: func(id string) error {
			return firstLine(slowHTTP(t, r.ctx, r.p.URL+"/a2a/v1", `{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{"id":"`+id+`"}}`, "text/event-stream", v1...))
		}},
		{name: "a2av1-rest", open: func(id string) error {
			return firstLine(slowHTTP(t, r.ctx, r.p.URL+"/a2a/v1/tasks/"+id+":subscribe", "", "text/event-stream", v1...))
		}},
		{name: "a2a-v03", v03: true, open: func(id string) error {
			return firstLine(slowHTTP(t, r.ctx, r.p.URL+"/a2a", `{"jsonrpc":"2.0","id":2,"method":"tasks/resubscribe","params":{"id":"`+id+`"}}`, "text/event-stream"))
		}},
		{name: "grpc", open: func(id string) error {
			d := smallWindowDialer()
			conn, err := grpc.NewClient(r.p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10), grpc.WithReadBufferSize(0),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
			if err != nil {
				return err
			}
			t.Cleanup(func() { _ = conn.Close() })
			st, err := a2apb.NewA2AServiceClient(conn).SubscribeToTask(r.ctx, &a2apb.SubscribeToTaskRequest{Id: id})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}},
	}
	before := slowCuts(t, r.p)
	answered := r.g.done.Load()
	for _, d := range doors {
		id := startTask(t, r.p, heldText+d.name, d.v03)
		testkit.Receive(t, r.g.taken, 30*time.Second, d.name+": the task's request taken")
		if err := d.open(id); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		// Stop reading: the agent writes 6 MiB.
		r.g.tokens <- struct{}{}
		answered++
		r.answered(t, answered)
		r.released(t, d.name+": the slow subscriber's stream")
	}
	slowCutCounted(t, r.p, before, map[string]float64{egress.FormatA2AV1SSE: 2, egress.FormatA2ASSE: 1, egress.FormatA2AV1GRPC: 1})
	// Whether the SDK logs a cut SubscribeToTask depends on where its
	// write waited (a flush it does not check, or a write): none at Error.
	sdkWriteFailuresAtDebug(t, &logs, -1)
}

// sdkWriteFailuresAtDebug checks that a2a-go's handlers logged the writes
// to the client that failed (want of them, when want ≥ 0) to the
// pipeline's logger at Debug, and that nothing was logged at Error. The SDK logged them at Error, to slog's default logger: every
// client that went away was an ERROR line an operator is paged for.
func sdkWriteFailuresAtDebug(t *testing.T, logs *testkit.Buffer, want int) {
	t.Helper()
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		if m["level"] == "ERROR" {
			t.Errorf("logged at ERROR: %s", l)
		}
		if msg, _ := m["msg"].(string); m["level"] == "DEBUG" && (strings.HasPrefix(msg, "failed to write") || msg == "failed to encode response") {
			n++
		}
	}
	if want >= 0 && n != want {
		t.Errorf("%d of the SDK's failed writes logged at DEBUG, want %d; logs:\n%s", n, want, logs.String())
	}
}

// TestSlowWholeReaderCut: a client of an answer given whole (a blocking
// send, E2A ?wait=true) that does not read it is cut off after the write
// timeout on every binding: nothing of its call is left while it still
// holds its connection. A v1.0 blocking SendMessage on JSON-RPC or
// HTTP+JSON (a2a-go's handler writes the answer) waited in that write for
// as long as the connection lived.
func TestSlowWholeReaderCut(t *testing.T) {
	var logs testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := startGone(t, 1500, 4096, pipetest.WithEgress(egress.WithWriteTimeout(300*time.Millisecond)),
		pipetest.WithIngress(ingress.WithLogger(log)))
	v1Msg := func(text string) string {
		return `{"message":{"role":"ROLE_USER","messageId":"m-` + text + `","parts":[{"text":"` + text + `"}]}}`
	}
	doors := []struct{ name, path, body string }{
		{"e2a-json", "/v1/requests?wait=true", `{"params":{"text":"slow-e2a-json"}}`},
		{"a2av1-send", "/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + v1Msg("slow-a2av1-send") + `}`},
		{"a2av1-rest-send", "/a2a/v1/message:send", v1Msg("slow-a2av1-rest-send")},
		{"a2a-v03-send", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","kind":"message","messageId":"m-slow-v03","parts":[{"kind":"text","text":"slow-v03"}]}}}`},
	}
	answered := r.g.done.Load()
	// The answer's head comes with its body: each call runs on its own,
	// its connection closed when the test ends.
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	for _, d := range doors {
		go func() {
			if resp, err := slowCall(ctx, r.p.URL+d.path, d.body, "application/json", "A2A-Version", "1.0"); err == nil {
				<-ctx.Done()
				resp.Body.Close()
			}
		}()
		answered++
		r.answered(t, answered)
		r.released(t, d.name+": the call of a client not reading its answer")
	}
	// The two v1.0 sends: the SDK's one write of the answer failed.
	sdkWriteFailuresAtDebug(t, &logs, 2)
}

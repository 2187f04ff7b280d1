package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	a2aclientv03 "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Recovery across serve replicas: two in-process serve replicas
// (ingress and egress on one HTTP server each, each on its own NATS
// connection) on one embedded NATS server, and the pool "demo" served by
// rvStepper, which writes one text chunk per step the test gives it. A
// client streams from replica A, which is killed mid-stream (its client
// connections and its NATS connection closed); the client reconnects to
// replica B the way its protocol's real client does.

const rvChunks = 6 // text chunks of a stepped answer

// rvWant is the stepped answer's whole text.
func rvWant() string {
	var b strings.Builder
	for i := range rvChunks {
		fmt.Fprintf(&b, "c%d ", i)
	}
	return b.String()
}

// rvStepper is an agent that writes chunk i ("c<i> ") when the test steps
// it, then, at the last step, its final frame with the whole text.
type rvStepper struct {
	steps   chan struct{}
	started chan string
	quit    chan struct{} // closed at the test's end: handlers return
}

func (g *rvStepper) serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	select {
	case g.started <- env.RequestID:
	default:
	}
	for i := w.ResumeAfter() + 1; i <= rvChunks; i++ {
		select {
		case <-g.steps:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.quit:
			return context.Canceled
		}
		if i == rvChunks {
			return w.Complete(map[string]any{"content": rvWant()})
		}
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: fmt.Sprintf("c%d ", i)}, false); err != nil {
			return err
		}
	}
	return nil
}

// step lets the agent write its next frame.
func (g *rvStepper) step(t *testing.T) {
	t.Helper()
	select {
	case g.steps <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not take a step")
	}
}

type rvReplica struct {
	url string
	srv *httptest.Server
	nc  *nats.Conn
	in  *ingress.Server
}

// kill ends the replica as a SIGKILL would, for its clients and NATS: its
// NATS connection and every client connection are closed at once.
func (r *rvReplica) kill() {
	r.nc.Close()
	r.srv.CloseClientConnections()
}

type rvCluster struct {
	a, b  *rvReplica
	agent *rvStepper
}

func rvReplicaOn(t *testing.T, natsURL, name string) *rvReplica {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	reg := prometheus.NewRegistry()
	f := pipetest.ServeFront(t, nc, []egress.Option{egress.WithRegisterer(reg), egress.WithProjections(protocols.FillProjections)},
		ingress.WithRegisterer(reg))
	return &rvReplica{url: f.URL, srv: f.Server, nc: nc, in: f.Ingress}
}

func rvStart(t *testing.T) *rvCluster {
	t.Helper()
	srv, nc := natstest.RunServer(t)
	c := &rvCluster{agent: &rvStepper{steps: make(chan struct{}), started: make(chan string, 4), quit: make(chan struct{})}}
	c.a = rvReplicaOn(t, srv.ClientURL(), "replica-a")
	c.b = rvReplicaOn(t, srv.ClientURL(), "replica-b")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, nc, "demo", agent.HandlerFunc(c.agent.serve), agent.WithMetrics(prometheus.NewRegistry()))
	}()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() { close(c.agent.quit) }) // first: no handler waits for the drain
	testkit.Eventually(t, 10*time.Second, "the demo pool's consumer", func() bool {
		m, err := c.b.in.Pools(ctx)
		return err == nil && m["demo"] != ""
	})
	return c
}

// rvSSE reads an SSE body's events as they come (closed at its end).
func rvSSE(body interface{ Read([]byte) (int, error) }) <-chan testkit.SSEEvent {
	out := make(chan testkit.SSEEvent, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev testkit.SSEEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if len(data) > 0 {
					ev.Data = strings.Join(data, "\n")
					out <- ev
				}
				ev, data = testkit.SSEEvent{}, nil
			case strings.HasPrefix(line, "id:"):
				ev.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			case strings.HasPrefix(line, "event:"):
				ev.Event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
	}()
	return out
}

// TestRecoveryE2ASSEOtherReplica: an E2A SSE client of replica A
// that had 3 frames when A died reconnects to replica B with
// GET /v1/requests/{id}/stream and Last-Event-ID, as an EventSource does:
// it gets every remaining frame once, in order, each within 1 s of its
// being written (docs/recovery.md, "An e2a serve replica dies").
func TestRecoveryE2ASSEOtherReplica(t *testing.T) {
	c := rvStart(t)
	resp := testkit.Open(t, http.MethodPost, c.a.url+"/v1/requests",
		`{"request_id":"rv-e2a-1","method":"chat.send","params":{"text":"hi"}}`, "Accept", "text/event-stream",
		"Content-Type", "application/json")
	evs := rvSSE(resp.Body)
	last := ""
	for range 3 {
		c.agent.step(t)
		last = testkit.Receive(t, evs, 10*time.Second, "no frame from replica A").ID
	}
	c.a.kill()
	for range evs { //nolint:revive // drain to the broken end
	}
	again := testkit.Open(t, http.MethodGet, c.b.url+"/v1/requests/rv-e2a-1/stream", "", "Accept", "text/event-stream",
		"Last-Event-ID", last)
	t.Cleanup(func() { again.Body.Close() })
	evs = rvSSE(again.Body)
	seqs := []int64{}
	for i := 3; i <= rvChunks; i++ {
		c.agent.step(t)
		ev := testkit.Receive(t, evs, time.Second, "frame %d not on replica B within 1 s of its write", i)
		f, err := e2a.ResponseFromJSON([]byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, f.Sequence)
	}
	if fmt.Sprint(seqs) != "[3 4 5 6]" {
		t.Fatalf("after Last-Event-ID %s replica B sent sequences %v, want [3 4 5 6]", last, seqs)
	}
	if ev, ok := <-evs; ok {
		t.Fatalf("an event after the final frame: %+v", ev)
	}
}

// rvApplyV03 applies a v0.3 artifact update as an A2A client keeps
// artifacts: append to the artifact of that id, or replace it.
func rvApplyV03(arts map[a2av03.ArtifactID]string, order *[]a2av03.ArtifactID, e *a2av03.TaskArtifactUpdateEvent) {
	id := e.Artifact.ID
	if _, ok := arts[id]; !ok {
		*order = append(*order, id)
	}
	if e.Append {
		arts[id] += textOf(e.Artifact.Parts)
	} else {
		arts[id] = textOf(e.Artifact.Parts)
	}
}

// TestRecoveryA2AV03ResubscribeOtherReplica: an a2a-go v0.3 client
// streaming message/stream from replica A, which dies after 3 chunks,
// calls ResubscribeToTask on replica B (the SDK sends no Last-Event-ID).
// Its artifacts, kept as A2A says (append or replace by artifact id),
// hold the whole answer once; the resubscription ends with one final
// status, completed; each remaining chunk reaches it within 1 s.
func TestRecoveryA2AV03ResubscribeOtherReplica(t *testing.T) {
	c := rvStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(url string) *a2aclientv03.Client {
		cl, err := a2aclientv03.NewFromEndpoints(ctx, []a2av03.AgentInterface{{URL: url + "/a2a", Transport: a2av03.TransportProtocolJSONRPC}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Destroy() })
		return cl
	}
	arts, order := map[a2av03.ArtifactID]string{}, []a2av03.ArtifactID{}
	var taskID a2av03.TaskID
	first := make(chan a2av03.Event, 64)
	go func() {
		defer close(first)
		for ev, err := range client(c.a.url).SendStreamingMessage(ctx, &a2av03.MessageSendParams{
			Message: a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "hi"})}) {
			if err != nil {
				return
			}
			first <- ev
		}
	}()
	chunks := 0
	c.agent.step(t)
	for chunks < 3 {
		ev := testkit.Receive(t, first, 10*time.Second, "no event from replica A")
		taskID = ev.TaskInfo().TaskID
		if au, ok := ev.(*a2av03.TaskArtifactUpdateEvent); ok {
			rvApplyV03(arts, &order, au)
			if chunks++; chunks < 3 {
				c.agent.step(t)
			}
		}
	}
	c.a.kill()
	for range first { //nolint:revive // drain to the broken end
	}
	again, errs := pump(client(c.b.url).ResubscribeToTask(ctx, &a2av03.TaskIDParams{ID: taskID}))
	finals, state := 0, a2av03.TaskState("")
	apply := func(ev a2av03.Event) {
		switch e := ev.(type) {
		case *a2av03.TaskArtifactUpdateEvent:
			rvApplyV03(arts, &order, e)
		case *a2av03.TaskStatusUpdateEvent:
			if e.Final {
				finals++
				state = e.Status.State
			}
		}
	}
	apply(testkit.Receive(t, again, 5*time.Second, "no event from replica B")) // its working status
	for i := 3; i <= rvChunks; i++ {
		c.agent.step(t)
		deadline := time.After(time.Second)
	wait:
		for {
			select {
			case ev, ok := <-again:
				if !ok {
					break wait
				}
				apply(ev)
				if _, isArt := ev.(*a2av03.TaskArtifactUpdateEvent); isArt && i < rvChunks {
					if strings.HasSuffix(arts[order[len(order)-1]], fmt.Sprintf("c%d ", i)) {
						break wait
					}
				}
				if finals > 0 {
					break wait
				}
			case <-deadline:
				t.Fatalf("step %d not on replica B within 1 s", i)
			}
		}
	}
	drain(t, again, errs, apply, "resubscribe")
	if text := joined(order, arts); text != rvWant() || finals != 1 || state != a2av03.TaskStateCompleted {
		t.Fatalf("after ResubscribeToTask on replica B the client holds %q (want %q), %d final statuses (state %s)",
			text, rvWant(), finals, state)
	}
}

// rvApplyV1 applies a v1.0 artifact to the client's artifacts (append or
// replace by id).
func rvApplyV1(arts map[a2a.ArtifactID]string, order *[]a2a.ArtifactID, art *a2a.Artifact, appendTo bool) {
	if _, ok := arts[art.ID]; !ok {
		*order = append(*order, art.ID)
	}
	if appendTo {
		arts[art.ID] += v1Text(art.Parts)
	} else {
		arts[art.ID] = v1Text(art.Parts)
	}
}

// TestRecoveryA2AV1SubscribeOtherReplica: an a2a-go/v2 client
// streaming SendStreamingMessage (JSON-RPC) from replica A, which dies
// after 3 chunks, calls SubscribeToTask on replica B: the Task it gets
// first and the updates after it hold the whole answer once (artifacts
// kept as A2A says), with one terminal status, completed, each remaining
// chunk within 1 s of its write.
func TestRecoveryA2AV1SubscribeOtherReplica(t *testing.T) {
	c := rvStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(url string) *a2aclient.Client {
		cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(url+ingress.A2AV1Path, a2a.TransportProtocolJSONRPC)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Destroy() })
		return cl
	}
	arts, order := map[a2a.ArtifactID]string{}, []a2a.ArtifactID{}
	var taskID a2a.TaskID
	first := make(chan a2a.Event, 64)
	go func() {
		defer close(first)
		for ev, err := range client(c.a.url).SendStreamingMessage(ctx, userMessage("hi")) {
			if err != nil {
				return
			}
			first <- ev
		}
	}()
	chunks := 0
	c.agent.step(t)
	for chunks < 3 {
		ev := testkit.Receive(t, first, 10*time.Second, "no event from replica A")
		taskID = ev.TaskInfo().TaskID
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			rvApplyV1(arts, &order, au.Artifact, au.Append)
			if chunks++; chunks < 3 {
				c.agent.step(t)
			}
		}
	}
	c.a.kill()
	for range first { //nolint:revive // drain to the broken end
	}
	// The client keeps what it had; the Task answers the artifacts as
	// they stand (a client replaces its artifacts with the Task's).
	again, errs := pump(client(c.b.url).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: taskID}))
	terminal, state := 0, a2a.TaskState("")
	apply := func(ev a2a.Event) {
		switch e := ev.(type) {
		case *a2a.Task:
			for _, art := range e.Artifacts {
				rvApplyV1(arts, &order, art, false)
			}
		case *a2a.TaskArtifactUpdateEvent:
			rvApplyV1(arts, &order, e.Artifact, e.Append)
		case *a2a.TaskStatusUpdateEvent:
			if e.Status.State.Terminal() {
				terminal++
				state = e.Status.State
			}
		}
	}
	apply(testkit.Receive(t, again, 5*time.Second, "no Task from replica B"))
	for i := 3; i <= rvChunks; i++ {
		c.agent.step(t)
		select {
		case ev, ok := <-again:
			if ok {
				apply(ev)
			}
		case <-time.After(time.Second):
			t.Fatalf("step %d not on replica B within 1 s", i)
		}
	}
	drain(t, again, errs, apply, "SubscribeToTask")
	if text := joined(order, arts); text != rvWant() || terminal != 1 || state != a2a.TaskStateCompleted {
		t.Fatalf("after SubscribeToTask on replica B the client holds %q (want %q), %d terminal statuses (state %s)",
			text, rvWant(), terminal, state)
	}
}

// rvACPText is the agent text of an ACP line (a session/update
// agent_message_chunk), and whether the line is the call's answer.
func rvACPText(t *testing.T, line []byte) (text string, answer bool) {
	t.Helper()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Update struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %s: %v", line, err)
	}
	if m.Method == "session/update" && m.Params.Update.Kind == "agent_message_chunk" {
		return m.Params.Update.Content.Text, false
	}
	return "", m.Method == "" && len(m.ID) > 0
}

// TestRecoveryACPSessionLoadOtherReplica: an ACP client (HTTP) whose
// session/prompt was streaming from replica A when A died (3 chunks
// received) reconnects to replica B the way an ACP client resumes a
// session, session/load. The load's replay plus what follows brings the
// rest of the running turn: the remaining chunks, within 1 s of their
// write. session/load replayed only the frames stored at the call and
// answered at once, so the rest of the running prompt never reached the
// client: ACP has no other call that follows it.
func TestRecoveryACPSessionLoadOtherReplica(t *testing.T) {
	c := rvStart(t)
	sid := acpNewSession(t, c.a.url, "")
	lines := acpLines(t, c.a.url, "", promptBody("1", sid, "hi", false))
	var got strings.Builder
	for got.Len() < len("c0 c1 c2 ") {
		if got.Len() == 0 || strings.HasSuffix(got.String(), " ") {
			c.agent.step(t)
		}
		line := testkit.Receive(t, lines, 10*time.Second, "no line from replica A")
		txt, _ := rvACPText(t, line)
		got.WriteString(txt)
	}
	c.a.kill()
	for range lines { //nolint:revive // drain to the broken end
	}
	load := acpLines(t, c.b.url, "", `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"`+sid+`","cwd":"/w","mcpServers":[]}}`)
	var replay strings.Builder
	// The replay of what is stored: up to c2.
	for replay.String() != "c0 c1 c2 " {
		line, ok := <-load
		if !ok {
			t.Fatalf("session/load on replica B ended after %q", replay.String())
		}
		txt, _ := rvACPText(t, line)
		replay.WriteString(txt)
	}
	for i := 3; i < rvChunks; i++ {
		c.agent.step(t)
		want := fmt.Sprintf("c%d ", i)
		for !strings.HasSuffix(replay.String(), want) {
			select {
			case line, ok := <-load:
				if !ok {
					t.Fatalf("session/load on replica B answered while the prompt was running, having replayed %q: "+
						"chunk %q (and the rest of the turn) reaches the client on no call", replay.String(), want)
				}
				txt, _ := rvACPText(t, line)
				replay.WriteString(txt)
			case <-time.After(time.Second):
				t.Fatalf("chunk %q not on replica B's session/load within 1 s of its write (got %q)", want, replay.String())
			}
		}
	}
	c.agent.step(t) // the final frame
}

// pump reads an SDK's event stream into a channel (closed at its end) and
// its error, if any, into another.
func pump[E any](seq iter.Seq2[E, error]) (<-chan E, <-chan error) {
	events, errs := make(chan E, 64), make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range seq {
			if err != nil {
				errs <- err
				return
			}
			events <- ev
		}
	}()
	return events, errs
}

// drain applies the rest of a pumped stream and fails t on its error.
func drain[E any](t *testing.T, events <-chan E, errs <-chan error, apply func(E), what string) {
	t.Helper()
	for ev := range events {
		apply(ev)
	}
	select {
	case err := <-errs:
		t.Fatalf("%s: %v", what, err)
	default:
	}
}

// joined is the text of the client's artifacts, in the order they came.
func joined[K comparable](order []K, arts map[K]string) string {
	var text strings.Builder
	for _, id := range order {
		text.WriteString(arts[id])
	}
	return text.String()
}

// TestACPLoadSessionFramesGone: session/load of a session whose request is
// still stored but whose frames E2A_RESPONSES no longer holds (its age or
// byte limit) answers at once with the prompt replayed: such a request is
// not followed as if it were running, which would wait for frames that
// never come.
func TestACPLoadSessionFramesGone(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"gone"}]}}`)
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), `"stopReason":"end_turn"`) {
		t.Fatalf("prompt: %s", b)
	}
	st, err := p.js.Stream(context.Background(), streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/acp",
		strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"`+sid+`","cwd":"/w","mcpServers":[]}}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), `"id":2,"result":{}`) || !strings.Contains(string(b), `"text":"gone"`) {
		t.Fatalf("session/load with the frames gone: %v %s", err, b)
	}
}

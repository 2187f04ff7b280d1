package push_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const pool = "pushtest"

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a pipeline for push tests: a real NATS server, an agent pool
// writing one text chunk "c<i>;" per step then completing, and the store.
type env struct {
	t     testing.TB
	srv   *streams.Embedded
	nc    *nats.Conn
	js    jetstream.JetStream
	pub   *ingress.Publisher
	store *push.Store
	log   *testkit.Buffer
}

func newEnv(t *testing.T, opts ...push.Option) *env {
	t.Helper()
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	e := &env{t: t, srv: srv, nc: nc, js: js, pub: ingress.NewPublisher(js, 10*time.Second), log: &testkit.Buffer{}}
	store, err := push.NewStore(tctx(t), nc, append([]push.Option{push.WithAllowHosts("127.0.0.1")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, nc, pool, agent.HandlerFunc(writeChunks), agent.WithConcurrency(16))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// gates hold writeChunks after its first chunk, by params.gate.
var gates sync.Map

// openGate lets the requests waiting on gate g go on.
func openGate(g string) {
	ch, _ := gates.LoadOrStore(g, make(chan struct{}))
	close(ch.(chan struct{}))
}

// writeChunks writes params.chunks text chunks, then completes.
func writeChunks(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	n, _ := strconv.ParseFloat(fmt.Sprint(env.Params["chunks"]), 64)
	turn, _ := env.Params["turn"].(string)
	pad, _ := strconv.Atoi(fmt.Sprint(env.Params["pad"])) // bytes added to each chunk
	for i := range int(n) {
		if err := w.Chunk("text", fmt.Sprintf("%sc%d;", turn, i)+strings.Repeat("x", pad)); err != nil {
			return err
		}
		if g, ok := env.Params["gate"].(string); ok && i == 0 {
			// The first chunk is written; wait until the test opens
			// the gate.
			ch, _ := gates.LoadOrStore(g, make(chan struct{}))
			select {
			case <-ch.(chan struct{}):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return w.Complete(nil)
}

// stage runs one replica of the stage on its own connection until the
// test ends or stop is called; stop returns once Run has returned.
type stage struct {
	t       testing.TB
	nc      *nats.Conn
	cancel  context.CancelFunc
	done    chan error
	crashed bool
}

func (e *env) startStage(opts ...push.Option) *stage {
	e.t.Helper()
	nc, err := e.srv.Connect(nats.Name("push-stage"))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stage{t: e.t, nc: nc, cancel: cancel, done: make(chan error, 1)}
	base := []push.Option{push.WithAllowHosts("127.0.0.1"), push.WithBackoff(5*time.Millisecond, 50*time.Millisecond),
		push.WithOrderWait(5 * time.Millisecond), push.WithAckWait(time.Second), push.WithLogger(slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		push.WithTimeout(5 * time.Second)}
	go func() { s.done <- push.Run(ctx, nc, append(base, opts...)...) }()
	e.t.Cleanup(s.stop)
	// The consumer delivers new messages only: wait until it exists.
	testkit.Eventually(e.t, 10*time.Second, "push consumer", func() bool {
		_, err := e.js.Consumer(context.Background(), streams.ResponsesStream, push.DefaultConsumer)
		return err == nil
	})
	return s
}

func (s *stage) stop() {
	s.cancel()
	if s.done != nil {
		if err := <-s.done; err != nil && !(s.crashed && errors.Is(err, nats.ErrConnectionClosed)) {
			s.t.Errorf("push.Run: %v", err)
		}
		s.done = nil
	}
	s.nc.Close()
}

// crash closes the stage's connection under it: nothing acked or nacked
// after that.
func (s *stage) crash() { s.crashed = true; s.nc.Close() }

// turn publishes one request of task taskID for principal, after the
// request after ("" for the first turn); it returns the request id.
func (e *env) turn(principal, taskID, after, label string, chunks int) string {
	e.t.Helper()
	return e.turnWith(principal, taskID, after, label, chunks, nil)
}

// turnWith is turn with more params.
func (e *env) turnWith(principal, taskID, after, label string, chunks int, params map[string]any) string {
	e.t.Helper()
	id := uuid.NewString()
	en := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "message/stream", IsStream: true,
		UserID: principal, TaskID: taskID, ContextID: "ctx-" + taskID, Channel: "test",
		Params:     map[string]any{"chunks": float64(chunks), "turn": label},
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}
	for k, v := range params {
		en.Params[k] = v
	}
	if _, err := e.pub.PublishAfter(tctx(e.t), pool, en, after); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// expectText is the text a task's turns write.
func expectText(turns []string, chunks int) string {
	var b strings.Builder
	for _, label := range turns {
		for i := range chunks {
			fmt.Fprintf(&b, "%sc%d;", label, i)
		}
	}
	return b.String()
}

// delivery is one POST a receiver got.
type delivery struct {
	eventID, token, auth string
	// tokenV1 and tokenV03 are the token headers as received (token is
	// the first set).
	tokenV1, tokenV03 string
	signature         string
	body              []byte
	code              int
}

// receiver is a webhook on loopback recording every POST in arrival order;
// answer decides each status (nil: 200).
type receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls int
	got   []delivery // answered calls, in the order they were answered
	// answer is called with the 0-based number of the POST.
	answer func(n int, w http.ResponseWriter) int
}

func newReceiver(t testing.TB, answer func(n int, w http.ResponseWriter) int) *receiver {
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := r.calls
		r.calls++
		r.mu.Unlock()
		code := http.StatusOK
		if r.answer != nil {
			code = r.answer(n, w)
		}
		r.mu.Lock()
		v1, v03 := req.Header.Get(push.HeaderTokenV1), req.Header.Get(push.HeaderTokenV03)
		r.got = append(r.got, delivery{eventID: req.Header.Get(push.HeaderEventID), token: cmp.Or(v1, v03), tokenV1: v1, tokenV03: v03,
			auth: req.Header.Get("Authorization"), signature: req.Header.Get(push.HeaderSignature), body: body, code: code})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// all returns every answered call.
func (r *receiver) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// accepted returns the calls answered 2xx: what the receiver got.
func (r *receiver) accepted() []delivery {
	var out []delivery
	for _, d := range r.all() {
		if d.code/100 == 2 {
			out = append(out, d)
		}
	}
	return out
}

// started is the number of calls received (answered or not).
func (r *receiver) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// update is a delivered update decoded with the SDK of its version.
type update struct {
	id     string
	text   string // the text of an artifact-update; v0.3: the task's agent text so far
	state  string // the state of a status-update; v0.3: the task's
	taskID string
}

func decode(t testing.TB, version string, d delivery) update {
	t.Helper()
	u := update{id: d.eventID}
	if version == push.V03 {
		// The whole Task, as the v0.3 SDKs' senders post it.
		var task a2a03.Task
		if err := json.Unmarshal(d.body, &task); err != nil || task.ID == "" {
			t.Fatalf("v0.3 body %s: not a Task: %v", d.body, err)
		}
		u.taskID, u.state = string(task.ID), string(task.Status.State)
		for _, m := range task.History {
			if m.Role == a2a03.MessageRoleAgent {
				u.text += text03(m.Parts)
			}
		}
		for _, a := range task.Artifacts {
			u.text += text03(a.Parts)
		}
		return u
	}
	var sr a2a.StreamResponse
	if err := json.Unmarshal(d.body, &sr); err != nil {
		t.Fatalf("v1.0 body %s: %v", d.body, err)
	}
	switch e := sr.Event.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		u.taskID = string(e.TaskID)
		for _, p := range e.Artifact.Parts {
			u.text += p.Text()
		}
	case *a2a.TaskStatusUpdateEvent:
		u.taskID, u.state = string(e.TaskID), string(e.Status.State)
	}
	return u
}

// ordered checks a receiver's POSTs: duplicates carry the same event id
// and body, the distinct updates come in the order of their ids (turn
// order, then frame sequence and index), their text is want and each turn
// ends with a completed status. It returns the distinct updates.
func ordered(t testing.TB, version string, got []delivery, turns []string, want string) []update {
	t.Helper()
	seen := map[string][]byte{}
	var distinct []update
	for _, d := range got {
		if b, ok := seen[d.eventID]; ok {
			if string(b) != string(d.body) {
				t.Errorf("event %s delivered twice with different bodies", d.eventID)
			}
			continue
		}
		seen[d.eventID] = d.body
		distinct = append(distinct, decode(t, version, d))
	}
	var text strings.Builder
	completed := 0
	for i, u := range distinct {
		if version == push.V03 {
			text.Reset() // each Task holds the text so far
		}
		text.WriteString(u.text)
		if u.state == string(a2a.TaskStateCompleted) || u.state == string(a2a03.TaskStateCompleted) {
			completed++
		}
		if i > 0 && !after(distinct[i-1].id, u.id, turns) {
			t.Errorf("update %s after %s: out of order", u.id, distinct[i-1].id)
		}
	}
	if text.String() != want {
		t.Errorf("text %q, want %q", text.String(), want)
	}
	if completed != len(turns) {
		t.Errorf("%d completed statuses, want %d", completed, len(turns))
	}
	return distinct
}

// after reports whether event id b follows a: the same request with a
// larger (frame, index), or a later request (its frame 0 after a's
// request's last).
func after(a, b string, _ []string) bool {
	ra, fa, ia := splitID(a)
	rb, fb, ib := splitID(b)
	if ra != rb {
		return fb == 0 && ib == 0
	}
	return fb > fa || (fb == fa && ib > ia)
}

func splitID(id string) (string, int, int) {
	p := strings.Split(id, ":")
	if len(p) != 3 {
		return id, -1, -1
	}
	f, _ := strconv.Atoi(p[1])
	i, _ := strconv.Atoi(p[2])
	return p[0], f, i
}

// handled waits until r got a completed status and the stage has handled
// the last update r got: the cursor of principal's only config of taskID
// is on it. The receiver records a POST before it answers, and the stage
// ends the POST's span and counts it in its metrics when it has the
// answer, then moves the cursor: past this wait both are done.
func (e *env) handled(principal, taskID string, r *receiver) {
	e.t.Helper()
	testkit.Eventually(e.t, 30*time.Second, "completed and handled", func() bool {
		got := r.accepted()
		if completedCount(e.t, push.V1, got) != 1 {
			return false
		}
		ds, err := e.store.Deliveries(tctx(e.t), principal, taskID)
		if err != nil {
			e.t.Fatal(err)
		}
		return len(ds) == 1 && ds[0].LastEvent == got[len(got)-1].eventID
	})
}

// logOnFailure logs the stage's output when t has failed: deferred by
// tests whose failures the log explains.
func (e *env) logOnFailure(t testing.TB) {
	if t.Failed() {
		t.Logf("log:\n%s", e.log.String())
	}
}

func (e *env) create(principal string, c push.Config) push.Config {
	e.t.Helper()
	got, err := e.store.Create(tctx(e.t), principal, c)
	if err != nil {
		e.t.Fatalf("create %s: %v", c.URL, err)
	}
	return got
}

// text03 is the text of v0.3 parts.
func text03(ps a2a03.ContentParts) string {
	var b strings.Builder
	for _, p := range ps {
		if tp, ok := p.(a2a03.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

// behindReplica adds to e's server a replica of E2A_RESPONSES that is
// behind: a mirror with MirrorDirect, which the server puts in the queue
// group answering E2A_RESPONSES' direct gets (as it puts each follower of
// a clustered stream once it has caught up), holding none of the messages
// stored since it was made, as a follower holds none of the messages the
// leader acknowledged that it has not applied yet. Any direct get of the
// stage may now be answered by it (the server picks a member of the group
// at random); the stream's leader answers $JS.API.STREAM.MSG.GET alone.
// (Real followers do: on natstest.RunCluster(t, 3) with a publisher
// flooding E2A_RESPONSES, 57 of 900 direct gets made right after a
// message's publish ack answered "no message".) A mirror is used here
// because no follower can be held behind in process.
// It checks the premise: a direct get of a stored message is answered
// "no message" by it at least once.
func behindReplica(t *testing.T, e *env) {
	t.Helper()
	ctx := tctx(t)
	behindSeed, err := subjects.Response("behind-seed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "E2A_RESPONSES_BEHIND", Storage: jetstream.MemoryStorage,
		Mirror:       &jetstream.StreamSource{Name: streams.ResponsesStream, FilterSubject: behindSeed},
		MirrorDirect: true}); err != nil {
		t.Fatal(err)
	}
	// The mirror joins the group once it has mirrored a message: the
	// only one it ever gets (a response of no request).
	natstest.PublishBurst(t, e.nc, "behind-seed", 0, 0, natstest.Frame("behind-seed", 0, false))
	id := "premise-" + t.Name()
	storeRequestAfter(t, e, id, "premise", "premise", "")
	storeFrame(t, e, id, "premise", "premise", 0, "x", false)
	subj, _ := subjects.Response(id)
	seed, _ := subjects.Response("behind-seed")
	testkit.Eventually(t, 10*time.Second, "the replica behind answers direct gets", func() bool {
		_, err := streams.LastBySubject(ctx, e.nc, streams.ResponsesStream, seed)
		return err == nil && storedIn(t, e, "E2A_RESPONSES_BEHIND") == 1
	})
	for range 200 {
		_, _, err := streams.DirectGetBatch(ctx, e.nc, streams.ResponsesStream, subj, 0, 1)
		if errors.Is(err, streams.ErrNoMessages) {
			return
		}
	}
	t.Fatal("premise: the replica behind never answered a direct get")
}

// storedIn is how many messages stream holds.
func storedIn(t testing.TB, e *env, stream string) uint64 {
	st, err := e.js.Stream(context.Background(), stream)
	if err != nil {
		return 0
	}
	info, err := st.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// storeRequestAfter stores user's request id of task, the turn after
// request after ("" for the first), in a pool no agent serves.
func storeRequestAfter(t *testing.T, e *env, id, user, task, after string) {
	t.Helper()
	h := []string{subjects.HeaderMsgID, id}
	if after != "" {
		h = append(h, subjects.HeaderAfterRequest, after)
	}
	natstest.PublishRequest(t, e.js, "noagent", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id,
		Method: "message/stream", IsStream: true, UserID: user, TaskID: task, ContextID: ctxOf(user, task), Channel: "test",
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}, h...)
}

// consumerIdle reports whether the push consumer has acknowledged every
// response frame stored (pushtest.StageIdle).
func consumerIdle(_ testing.TB, e *env) bool { return pushtest.StageIdle(e.js) }

// completedBy is, per request id, whether r got its completed status.
func completedBy(t testing.TB, r *receiver) map[string]bool {
	out := map[string]bool{}
	for _, d := range r.accepted() {
		u := decode(t, push.V1, d)
		if u.state == "completed" || u.state == "TASK_STATE_COMPLETED" {
			req, _, _ := splitID(d.eventID)
			out[req] = true
		}
	}
	return out
}

// newEnvOn is newEnv on a server started with opts, without the agent:
// the tests store their requests and frames themselves.
func newEnvOn(t *testing.T, opts ...natstest.Option) *env {
	t.Helper()
	srv, nc := natstest.RunServer(t, opts...)
	e := &env{t: t, srv: srv, nc: nc, js: natstest.JetStream(t, nc), log: &testkit.Buffer{}}
	store, err := push.NewStore(tctx(t), nc, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	return e
}

// firstLine is the first line of s holding sub, cut to 300 bytes.
func firstLine(s, sub string) string {
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			return l[:min(len(l), 300)]
		}
	}
	return ""
}

// healingReceiver is a receiver answering 503 until healed is set, then
// 200.
func healingReceiver(t testing.TB) (r *receiver, healed *atomic.Bool) {
	healed = new(atomic.Bool)
	return newReceiver(t, func(int, http.ResponseWriter) int {
		if healed.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	}), healed
}

// twoTurns are the request ids of a task's two turns.
type twoTurns struct{ task, r1, r2 string }

// twoTurnTasks makes n tasks <prefix>-<k> of alice's, each with a config
// of version posting to r, and returns their turns' ids (nothing stored).
func twoTurnTasks(e *env, r *receiver, prefix string, n int, version string) []twoTurns {
	all := make([]twoTurns, n)
	for k := range all {
		task := fmt.Sprintf("%s-%d", prefix, k)
		e.create("alice", push.Config{TaskID: task, URL: r.srv.URL, Version: version})
		all[k] = twoTurns{task: task, r1: task + "-r1", r2: task + "-r2"}
	}
	return all
}

// storeTurn stores alice's request id of task (after the turn after, ""
// for the first) and its two frames: text, then the final one.
func storeTurn(t *testing.T, e *env, id, task, after, text string) {
	t.Helper()
	storeRequestAfter(t, e, id, "alice", task, after)
	storeFrame(t, e, id, "alice", task, 0, text, false)
	storeFrame(t, e, id, "alice", task, 1, "", true)
}

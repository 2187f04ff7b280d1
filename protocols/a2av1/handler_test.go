package a2av1

import (
	"context"
	"errors"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// fakeHost is the pipeline as the package sees it: the conformance kit's
// binding host (callers admitted by an X-Api-Key naming them, their tasks
// under the ownership rule, submissions recorded, frames served) with the
// test's A2A v1.0 answers, so the handler is tested without ingress.
type fakeHost struct {
	*conformance.BindingHost
	answers Answers // nil: fakeAnswers
}

var _ Host = fakeHost{}

// newFakeHost is a fakeHost decoding with the normalizer's defaults.
func newFakeHost() fakeHost {
	return fakeHost{BindingHost: &conformance.BindingHost{RPCHost: conformance.RPCHost{
		Host: conformance.Host{Norm: normalizer.New(normalizer.Config{})}}}}
}

func (f fakeHost) V1Answers() Answers {
	if f.answers != nil {
		return f.answers
	}
	return fakeAnswers{}
}

// fakeAnswers answers every task as completed, its requests' count as its
// history.
type fakeAnswers struct{ Answers }

func (fakeAnswers) A2ATaskOf(_ context.Context, t *host.Task, _ *int) (*a2a.Task, error) {
	return &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, nil
}

// A2ATaskNow is A2ATaskOf: no turn follows a fake task's.
func (f fakeAnswers) A2ATaskNow(ctx context.Context, t *host.Task, n *int, _ func(context.Context, string) (string, error)) (*a2a.Task, error) {
	return f.A2ATaskOf(ctx, t, n)
}

func (fakeAnswers) A2AEvents(context.Context, string, a2amap.Params, int64, ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

func (fakeAnswers) Heartbeat() time.Duration { return time.Second }

func (fakeAnswers) A2ATurnTask(_ context.Context, t *host.Task, _ *e2a.Envelope, _ *int) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
}

func (fakeAnswers) A2AResult(_ context.Context, requestID string, p a2amap.Params, _ ...egress.ReplayOption) (a2a.SendMessageResult, error) {
	return &a2a.Task{ID: a2a.TaskID(p.TaskID), ContextID: p.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, nil
}

func (a fakeAnswers) A2AFollow(ctx context.Context, requestID string, p a2amap.Params, from int64, _ a2aproto.Follow, opts ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return a.A2AEvents(ctx, requestID, p, from, opts...)
}

func (a fakeAnswers) A2ASubscription(ctx context.Context, task *host.Task, _ bool, _ a2aproto.Follow, _ ...egress.ReplayOption) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		t, _ := a.A2ATaskOf(ctx, task, nil)
		yield(t, nil)
	}
}

func (fakeAnswers) CancelTurns(context.Context, *host.Task, egress.CancelFunc) (bool, error) {
	return false, egress.ErrNotCancelable
}

// key is the X-Api-Key of the tests' caller, naming it; other is another
// principal.
const key, other = "k", "other"

func task(id, ctx, protocol, updated string) host.ListedTask {
	return host.ListedTask{Task: host.Task{Session: host.Session{ID: id, Protocol: protocol, RequestIDs: []string{"r-" + id}},
		ContextID: ctx}, Updated: updated}
}

// newHandler is the handler over fh, its call the tests' caller's.
func newHandler(fh fakeHost) (*handler, context.Context) {
	return &handler{h: fh}, withCall(context.Background(), call{header: http.Header{}, channel: "http", c: fh.CallerOf(key)})
}

// TestListTasksPages: the caller's A2A tasks, the most recent status first
// (here tasks without a status timestamp: their records' update time;
// ties by id), in pages joined by the cursor, filtered by context; another
// protocol's tasks and another principal's are not listed.
func TestListTasksPages(t *testing.T) {
	fh := newFakeHost()
	for _, tk := range []host.ListedTask{
		task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"),
		task("b", "c1", normalizer.ProtocolA2A, "2026-11-25T12:00:00Z"),
		task("c", "c2", normalizer.ProtocolA2A, "2026-11-25T11:00:00Z"),
		task("d", "c2", normalizer.ProtocolA2A, "2026-11-25T12:00:00Z"),
		task("v", "c1", normalizer.ProtocolAgentVault, "2026-11-25T13:00:00Z"),
	} {
		fh.AddTask(key, tk)
	}
	fh.AddTask(other, task("o", "c3", normalizer.ProtocolA2A, "2026-11-25T14:00:00Z"))
	h, ctx := newHandler(fh)
	var ids []string
	token := ""
	for page := 0; ; page++ {
		res, err := h.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		// pageSize is the size used, whatever the page holds (the last
		// page holds 1).
		if res.TotalSize != 4 || res.PageSize != 3 {
			t.Fatalf("page %d: total %d, size %d of %d", page, res.TotalSize, res.PageSize, len(res.Tasks))
		}
		for _, task := range res.Tasks {
			ids = append(ids, string(task.ID))
		}
		if token = res.NextPageToken; token == "" {
			break
		}
	}
	if want := []string{"b", "d", "c", "a"}; !slices.Equal(ids, want) {
		t.Errorf("listed %v, want %v", ids, want)
	}
	res, err := h.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: "c2"})
	if err != nil || len(res.Tasks) != 2 || res.Tasks[0].ID != "d" || res.NextPageToken != "" {
		t.Errorf("context c2: %+v %v", res, err)
	}
	for _, req := range []*a2a.ListTasksRequest{{PageSize: 101}, {PageToken: "!"}, {Status: "TASK_STATE_NONE"}} {
		if _, err := h.ListTasks(ctx, req); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("%+v: %v", req, err)
		}
	}
}

func message(taskID, contextID string) *a2a.SendMessageRequest {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	m.TaskID, m.ContextID = a2a.TaskID(taskID), contextID
	return &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}
}

// TestSendMessageOwnership: a message continues only the caller's open
// task, joins only a context that is not another principal's, and nothing
// is published otherwise.
func TestSendMessageOwnership(t *testing.T) {
	fh := newFakeHost()
	fh.AddTask(key, task("mine", "c1", normalizer.ProtocolA2A, ""))
	fh.AddTask(key, task("done", "c1", normalizer.ProtocolA2A, ""))
	fh.EndTask("done")
	fh.AddTask(other, task("others", "c2", normalizer.ProtocolA2A, ""))
	if err := fh.ClaimContext(other, "theirs"); err != nil {
		t.Fatal(err)
	}
	h, ctx := newHandler(fh)
	for _, tc := range []struct {
		req  *a2a.SendMessageRequest
		want error
	}{
		{message("unknown", ""), a2a.ErrTaskNotFound},
		{message("others", ""), a2a.ErrTaskNotFound},
		{message("done", ""), a2a.ErrUnsupportedOperation},
		{message("", "theirs"), a2a.ErrInvalidParams},
	} {
		if _, err := h.SendMessage(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("task %q context %q: %v, want %v", tc.req.Message.TaskID, tc.req.Message.ContextID, err, tc.want)
		}
	}
	if n := len(fh.Published()); n != 0 {
		t.Fatalf("published %d", n)
	}
	res, err := h.SendMessage(ctx, message("mine", ""))
	if err != nil {
		t.Fatal(err)
	}
	pub := fh.Published()
	if got, ok := res.(*a2a.Task); !ok || got.ID != "mine" || got.ContextID != "c1" || len(pub) != 1 {
		t.Fatalf("continued: %+v, published %d", res, len(pub))
	}
	if rec, _ := fh.Task("mine"); !slices.Equal(rec.RequestIDs, []string{"r-mine", pub[0].RequestID}) {
		t.Errorf("task record %v, want the turn %s after r-mine", rec.RequestIDs, pub[0].RequestID)
	}
}

// TestBindingsGate: each HTTP binding admits through the host's gate,
// refusing in its own shape, and serves the admitted caller's calls.
func TestBindingsGate(t *testing.T) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"))
	b := Bindings(fh)
	for _, tc := range []struct {
		name    string
		h       http.Handler
		method  string
		path    string
		body    string
		key     string
		status  int
		contain string
	}{
		{"rest refused", b.REST, "GET", Path + "/tasks", "", "", 401, `"status":"UNAUTHENTICATED"`},
		{"rest", b.REST, "GET", Path + "/tasks", "", key, 200, `"id":"a"`},
		{"rest another principal", b.REST, "GET", Path + "/tasks", "", other, 200, `"tasks":[]`},
		{"jsonrpc refused", b.JSONRPC, "POST", Path, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`, "", 401, `"id":1,`},
		{"jsonrpc", b.JSONRPC, "POST", Path, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`, key, 200, `"id":"a"`},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.key != "" {
			r.Header.Set("X-Api-Key", tc.key)
		}
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, r)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.contain) {
			t.Errorf("%s: %d %s", tc.name, w.Code, w.Body)
		}
	}
}

// TestGRPCGate: the gRPC service admits each call through the host's
// header gate before the SDK reads it, a refusal a gRPC status.
func TestGRPCGate(t *testing.T) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, ""))
	client := grpcClient(t, fh)
	ctx := context.Background()
	if _, err := client.GetTask(ctx, &a2apb.GetTaskRequest{Id: "a"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("without a key: %v", err)
	}
	got, err := client.GetTask(metadata.AppendToOutgoingContext(ctx, "x-api-key", key), &a2apb.GetTaskRequest{Id: "a"})
	if err != nil || got.GetId() != "a" {
		t.Errorf("with a key: %v %v", got, err)
	}
	if _, err := client.GetTask(metadata.AppendToOutgoingContext(ctx, "x-api-key", other), &a2apb.GetTaskRequest{Id: "a"}); status.Code(err) != codes.NotFound {
		t.Errorf("another principal's task: %v", err)
	}
}

// grpcClient is a client of the gRPC binding over fh, served in memory
// until the test ends.
func grpcClient(t *testing.T, fh fakeHost) a2apb.A2AServiceClient {
	t.Helper()
	return a2apb.NewA2AServiceClient(grpcConn(t, fh))
}

// grpcConn is a connection to the gRPC binding over fh, served in memory
// until the test (or fuzz target) ends.
func grpcConn(t testing.TB, fh fakeHost) *grpc.ClientConn {
	t.Helper()
	b := Bindings(fh)
	gs := grpc.NewServer(b.GRPCServerOptions...)
	b.GRPC(gs)
	ln := bufconn.Listen(1 << 20)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestGRPCListTasksUnknownStatus: a ListTasks status that is no TaskState
// (proto3 enums are open: a number the schema does not name decodes) is
// InvalidParams over gRPC, as JSON-RPC and HTTP+JSON answer a status they
// do not know (A2A v1.0 §5.1: the same error handling on every binding).
// The SDK's conversion read it as no filter: every task was listed, a
// client taking the page for the tasks in that state.
func TestGRPCListTasksUnknownStatus(t *testing.T) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"))
	client := grpcClient(t, fh)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
	res, err := client.ListTasks(ctx, &a2apb.ListTasksRequest{Status: a2apb.TaskState(99)})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ListTasks status 99 over gRPC: %d tasks, err %v; want INVALID_ARGUMENT (InvalidParams), "+
			"as JSON-RPC and HTTP+JSON refuse a status that is no task state", len(res.GetTasks()), err)
	}
	res, err = client.ListTasks(ctx, &a2apb.ListTasksRequest{Status: a2apb.TaskState_TASK_STATE_COMPLETED})
	if err != nil || len(res.GetTasks()) != 1 {
		t.Fatalf("ListTasks TASK_STATE_COMPLETED over gRPC: %v %v, want task a", res, err)
	}
}

// servingHost is a fakeHost whose Serve (the kit's: it records the
// request and format) renders one text frame of any request.
func servingHost() fakeHost {
	fh := newFakeHost()
	// One frame: the submitted status-update goes with the first frame.
	fh.FramesFor = func(requestID string) []*e2a.Response {
		return []*e2a.Response{{RequestID: requestID, ResponseID: requestID + "-0", ResponseKind: e2a.KindChunk,
			Status: e2a.StatusInProgress, Timestamp: "2025-01-23T10:30:00Z", Body: []byte(`{"delta_kind":"text","delta":"hi"}`)}}
	}
	return fh
}

// TestStreamRPCRoutes: the JSON-RPC binding streams SendStreamingMessage,
// and the HTTP+JSON binding message:stream, with egress (Serve, format
// a2av1_sse) once the call is published; what is refused before (params
// or a body the SDK cannot decode, the handler's refusal, an envelope the
// SDK refuses) is the SDK's answer, nothing published and no stream
// served; other calls are the SDK's.
func TestStreamRPCRoutes(t *testing.T) {
	msg := `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	for _, tc := range []struct {
		name      string
		path      string // "": JSON-RPC
		body      string
		version   string
		native    bool
		contain   string
		published int
	}{
		{"streamed", "", `{"jsonrpc":"2.0","id":"s-1","method":"SendStreamingMessage","params":` + msg + `}`, "", true,
			`"id":"s-1","result":{"task":`, 1},
		{"numeric id", "", `{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":` + msg + `}`, "", true, `"id":7,"result"`, 1},
		{"params not decoded", "", `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":5}}`, "", false, `"id":2,"error":{"code":-32602`, 0},
		{"no params", "", `{"jsonrpc":"2.0","id":3,"method":"SendStreamingMessage"}`, "", false, `"id":3,"error"`, 0},
		{"refused by the handler", "", `{"jsonrpc":"2.0","id":4,"method":"SendStreamingMessage","params":` + msg + `}`, "0.5", false,
			`"id":4,"error":{"code":-32009`, 0},
		{"unknown task", "", `{"jsonrpc":"2.0","id":6,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-2","taskId":"t-9",` +
			`"role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, "", false, `"id":6,"error":{"code":-32001`, 0},
		{"object id", "", `{"jsonrpc":"2.0","id":{"a":1},"method":"SendStreamingMessage","params":` + msg + `}`, "", false, `"code":-32600`, 0},
		{"id beyond float64", "", `{"jsonrpc":"2.0","id":1e400,"method":"SendStreamingMessage","params":` + msg + `}`, "", false, `"id":null,"error":{"code":-32602`, 0},
		{"not 2.0", "", `{"jsonrpc":"1.0","id":5,"method":"SendStreamingMessage","params":` + msg + `}`, "", false, `"code":-32600`, 0},
		{"rest streamed", restStreamPath, msg, "", true, `data: {"task":`, 1},
		{"rest body not decoded", restStreamPath, `{"message":5`, "", false, `"status":"INVALID_ARGUMENT"`, 0},
		{"rest refused by the handler", restStreamPath, msg, "0.5", false, `"status":"FAILED_PRECONDITION"`, 0},
		{"rest body too large", restStreamPath, `{"message":"` + strings.Repeat("x", 1<<20) + `"}`, "", false, `"code":413`, 0},
		{"rest send", Path + "/message:send", `{"message":{"messageId":"m-3","taskId":"t-9","role":"ROLE_USER","parts":[{"text":"hi"}]}}`,
			"", false, `"status":"NOT_FOUND"`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fh := servingHost()
			b := Bindings(fh)
			h, path := b.JSONRPC, Path
			if tc.path != "" {
				h, path = b.REST, tc.path
			}
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(tc.body))
			r.Header.Set("X-Api-Key", key)
			if tc.version != "" {
				r.Header.Set("A2A-Version", tc.version)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			served, pub := fh.Served(), fh.Published()
			if got := len(served) == 1 && len(pub) == 1 && served[0] == pub[0].RequestID+" "+StreamFormat; got != tc.native {
				t.Errorf("served by egress %v (%q), want %v", got, served, tc.native)
			}
			if len(pub) != tc.published {
				t.Errorf("%d published, want %d", len(pub), tc.published)
			}
			if !strings.Contains(w.Body.String(), tc.contain) {
				t.Errorf("answered %d %s, want %s", w.Code, w.Body, tc.contain)
			}
		})
	}
}

// stampedAnswers is fakeAnswers with each task's status timestamp (none
// for a task not in the map).
type stampedAnswers struct {
	fakeAnswers
	at map[string]time.Time
}

func (s stampedAnswers) A2ATaskOf(ctx context.Context, t *host.Task, n *int) (*a2a.Task, error) {
	task, err := s.fakeAnswers.A2ATaskOf(ctx, t, n)
	if at, ok := s.at[t.ID]; ok && err == nil {
		task.Status.Timestamp = &at
	}
	return task, err
}

// TestListTasksByStatusTimestamp: ListTasks sorts by the tasks' status
// timestamps, most recent first, not by when their records were written
// (a task without one by that), each task once across pages;
// statusTimestampAfter keeps a task whose status timestamp equals it.
func TestListTasksByStatusTimestamp(t *testing.T) {
	base := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	fh := newFakeHost()
	fh.answers = stampedAnswers{at: map[string]time.Time{
		"a": base.Add(4 * time.Hour), "b": base.Add(time.Hour), "c": base.Add(3 * time.Hour)}}
	for _, tk := range []host.ListedTask{
		task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T09:00:00Z"),
		task("b", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"),
		task("c", "c1", normalizer.ProtocolA2A, "2026-11-25T11:00:00Z"),
		task("d", "c1", normalizer.ProtocolA2A, "2026-11-25T15:30:00Z"), // no status timestamp
	} {
		fh.AddTask(key, tk)
	}
	h, ctx := newHandler(fh)
	var ids []string
	token := ""
	for {
		res, err := h.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range res.Tasks {
			ids = append(ids, string(task.ID))
		}
		if token = res.NextPageToken; token == "" {
			break
		}
	}
	if want := []string{"a", "d", "c", "b"}; !slices.Equal(ids, want) {
		t.Errorf("listed %v, want %v", ids, want)
	}
	after := base.Add(3 * time.Hour)
	res, err := h.ListTasks(ctx, &a2a.ListTasksRequest{StatusTimestampAfter: &after})
	if err != nil || len(res.Tasks) != 3 || res.Tasks[0].ID != "a" || res.Tasks[2].ID != "c" || res.TotalSize != 3 {
		t.Errorf("statusTimestampAfter %s: %+v %v, want a, d, c", after, res, err)
	}
}

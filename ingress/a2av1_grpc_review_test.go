package ingress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"golang.org/x/net/http2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// heldPipeline is a pipeline (gRPC served) whose default pool "held"
// writes "<text> begins, ", reports the text on started, and waits for
// release before it writes "done: <text>" and completes. Its AckWait is a
// minute: a turn is held for up to 50 s, and on a loaded machine a few
// seconds without a heartbeat (the 4 s default) had the turn taken over
// and ended agent_interrupted (TestA2AV1GRPCClientPingsKeepStream's stream
// then ended without COMPLETED); takeovers are not what these tests check.
func heldPipeline(t *testing.T, opts ...pipetest.Option) (p *pipetest.Pipeline, started chan string, release chan struct{}) {
	t.Helper()
	p = pipetest.Start(t, append([]pipetest.Option{pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("held"))}, opts...)...)
	started, release = make(chan string, 8), make(chan struct{})
	p.Pool("held", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		text, _ := env.Params["text"].(string)
		if err := w.Chunk(e2a.DeltaText, text+" begins, "); err != nil {
			return err
		}
		started <- text
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
		}
		if err := w.Chunk(e2a.DeltaText, "done: "+text); err != nil {
			return err
		}
		return w.Complete(nil)
	}), agent.WithAckWait(time.Minute))
	return p, started, release
}

// boundClient is a2a-go/v2's client built from p's card preferring binding
// (gRPC among its transports).
func boundClient(t *testing.T, p *pipetest.Pipeline, binding a2a.TransportProtocol) *a2aclient.Client {
	t.Helper()
	return up.Client(t, p.URL, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
}

// awaitCompleted waits for task id to complete (GetTask with c) and
// returns its text.
func awaitCompleted(t *testing.T, c *a2aclient.Client, id a2a.TaskID, what string) string {
	t.Helper()
	var task *a2a.Task
	testkit.Eventually(t, 20*time.Second, what+": the task completed", func() bool {
		var err error
		task, err = c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
		return err == nil && task.Status.State == a2a.TaskStateCompleted
	})
	var b strings.Builder
	for _, a := range task.Artifacts {
		b.WriteString(v1Text(a.Parts))
	}
	return b.String()
}

// TestA2AV1GRPCDeadlineKeepsTask: a blocking SendMessage whose client
// deadline ends before the agent answers is DEADLINE_EXCEEDED on gRPC
// (a2a-go/v2 reads context.DeadlineExceeded), and the message is not
// lost: the task runs on, listed (ListTasks) and read (GetTask) to its
// end, as on JSON-RPC and HTTP+JSON (A2A v1.0 §3.3.3: the task lives
// apart from the call; §5.1: the bindings answer alike).
func TestA2AV1GRPCDeadlineKeepsTask(t *testing.T) {
	p, started, release := heldPipeline(t)
	for i, binding := range v1Bindings {
		c := boundClient(t, p, binding)
		text := "deadline " + string(binding)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.SendMessage(ctx, up.Msg(text))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: blocking SendMessage past the client's deadline: %v; want DEADLINE_EXCEEDED", binding, err)
		}
		if got := testkit.Receive(t, started, 10*time.Second, "%s: the agent started", binding); got != text {
			t.Fatalf("%s: started %q", binding, got)
		}
		list, err := c.ListTasks(context.Background(), &a2a.ListTasksRequest{})
		if err != nil || len(list.Tasks) != i+1 || list.Tasks[0].Status.State != a2a.TaskStateWorking {
			t.Fatalf("%s: ListTasks after the deadline: %+v %v; want the task, working", binding, list, err)
		}
		id := list.Tasks[0].ID
		release <- struct{}{}
		if got := awaitCompleted(t, c, id, string(binding)); got != text+" begins, done: "+text {
			t.Errorf("%s: the task's text %q after the client's deadline", binding, got)
		}
	}
}

// TestA2AV1GRPCCanceledStreamResumes: a client that cancels its
// SendStreamingMessage mid-task leaves the task running (A2A v1.0 §3.1.2,
// §3.5.2: a stream is a view of the task), and SubscribeToTask follows it
// to its end (§3.1.6), on gRPC as on JSON-RPC and HTTP+JSON.
func TestA2AV1GRPCCanceledStreamResumes(t *testing.T) {
	p, started, release := heldPipeline(t)
	for _, binding := range v1Bindings {
		c := boundClient(t, p, binding)
		text := "resume " + string(binding)
		ctx, cancel := context.WithCancel(context.Background())
		var id a2a.TaskID
		for ev, err := range c.SendStreamingMessage(ctx, up.Msg(text)) {
			if err != nil {
				t.Fatalf("%s: SendStreamingMessage: %v", binding, err)
			}
			if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && strings.Contains(v1Text(a.Artifact.Parts), "begins") {
				id = a.TaskID
				break
			}
		}
		cancel()
		testkit.Receive(t, started, 10*time.Second, "%s: the agent started", binding)
		if id == "" {
			t.Fatalf("%s: the stream ended before the agent's first chunk", binding)
		}
		sub, stop := context.WithTimeout(context.Background(), 20*time.Second)
		var last a2a.Event
		var text2 strings.Builder
		first := true
		for ev, err := range c.SubscribeToTask(sub, &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				t.Fatalf("%s: SubscribeToTask after the canceled stream: %v", binding, err)
			}
			if first {
				first = false
				release <- struct{}{}
			}
			if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
				text2.WriteString(v1Text(a.Artifact.Parts))
			}
			last = ev
		}
		stop()
		if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted ||
			!strings.Contains(text2.String(), "done: "+text) {
			t.Errorf("%s: the subscription ended with %+v, text %q; want the task completed with done: %s", binding, last, text2.String(), text)
		}
	}
}

// TestA2AV1GRPCUnavailableSaysServerError: a temporary failure (the
// message not published in time; the gate's fail-closed rate limiter
// unavailable) is UNAVAILABLE with a RetryInfo over gRPC and, as on
// HTTP+JSON and JSON-RPC, the ErrorInfo naming the A2A error
// (SERVER_ERROR, domain a2a-protocol.org): A2A v1.0 §10.6 ("MUST include a
// google.rpc.ErrorInfo"), §5.1 (the bindings agree).
func TestA2AV1GRPCUnavailableSaysServerError(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithPublishTimeout(300*time.Millisecond)))
	p.Pool("demo", whoAmI("demo"))
	if err := p.JS.DeleteStream(context.Background(), "E2A_REQUESTS"); err != nil {
		t.Fatal(err)
	}
	checkServerError(t, p, "JetStream did not take the message")

	// The gate's rate limiter, fail-closed, loses its bucket's connection.
	srv, nc := natstest.RunServer(t)
	lc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := ingress.EnsureRateLimitBucket(context.Background(), natstest.JetStream(t, lc))
	if err != nil {
		t.Fatal(err)
	}
	l := ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.DefaultRateLimits(), FailClosed: true})
	p = pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithLimiter(l)))
	lc.Close()
	checkServerError(t, p, "the rate limiter unavailable")
}

// checkServerError sends a message to p over HTTP+JSON and gRPC, which
// must both fail temporarily (what): the ErrorInfo SERVER_ERROR on both,
// gRPC's status UNAVAILABLE with a RetryInfo of 1s.
func checkServerError(t *testing.T, p *pipetest.Pipeline, what string) {
	t.Helper()
	_, restBody := testkit.Do(t, http.MethodPost, p.URL+"/a2a/v1/message:send",
		`{"message":{"role":"ROLE_USER","messageId":"m-rest","parts":[{"text":"hi"}]}}`, "Content-Type", "application/json", "A2A-Version", "1.0")
	if !strings.Contains(string(restBody), `"reason":"SERVER_ERROR"`) {
		t.Fatalf("%s: the HTTP+JSON answer %s; want the ErrorInfo SERVER_ERROR", what, restBody)
	}
	c, ctx := grpcProtoClient(t, p.GRPCAddr)
	_, err := c.SendMessage(ctx, grpcProtoMsg("m-grpc", "hi"))
	st, _ := status.FromError(err)
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if st.Code() != codes.Unavailable || retryDelay(st) != time.Second || info.GetReason() != "SERVER_ERROR" ||
		info.GetDomain() != a2a.ProtocolDomain {
		t.Errorf("%s: gRPC SendMessage %v %q, RetryInfo %v, ErrorInfo %v; want UNAVAILABLE, RetryInfo 1s and the "+
			"ErrorInfo SERVER_ERROR (a2a-protocol.org) the other bindings answer", what, st.Code(), st.Message(), retryDelay(st), info)
	}
}

// pingCounter wraps a client connection and reports each keepalive
// HTTP/2 PING frame the server sends on it (grpc-go's keepalive pings
// carry 8 zero bytes): pings (the server's own) and acks (answers to the
// client's), and the debug data of a GOAWAY.
type pingCounter struct {
	net.Conn
	w           *io.PipeWriter
	pings, acks chan struct{}
	goaway      chan string
}

func (c *pingCounter) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		_, _ = c.w.Write(b[:n])
	}
	return n, err
}

// dialCounted is a dialer whose connections report the server's PING
// frames on pc.
func dialCounted(pc *pingCounter) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		r, w := io.Pipe()
		pc.Conn, pc.w = conn, w
		go func() {
			fr := http2.NewFramer(nil, r)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					_ = r.CloseWithError(err)
					return
				}
				switch f := f.(type) {
				case *http2.PingFrame:
					if f.Data != [8]byte{} {
						continue // grpc-go's BDP estimation, not a keepalive
					}
					ch := pc.pings
					if f.IsAck() {
						ch = pc.acks
					}
					select {
					case ch <- struct{}{}:
					default:
					}
				case *http2.GoAwayFrame:
					select {
					case pc.goaway <- string(f.DebugData()):
					default:
					}
				}
			}
		}()
		return pc, nil
	})
}

// heldStream opens a SubscribeToTask stream over conn on a task of p's
// held pool (sent with returnImmediately) and reads its first event.
func heldStream(t *testing.T, ctx context.Context, conn *grpc.ClientConn, started <-chan string) a2apb.A2AService_SubscribeToTaskClient {
	t.Helper()
	c := a2apb.NewA2AServiceClient(conn)
	res, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: grpcProtoMsg("m-held", "held").GetMessage(),
		Configuration: &a2apb.SendMessageConfiguration{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	testkit.Receive(t, started, 10*time.Second, "the agent started")
	s, err := c.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: res.GetTask().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("SubscribeToTask: %v", err)
	}
	return s
}

// TestA2AV1GRPCServerPingsHeldStream: a stream on a task whose agent
// thinks for long carries nothing for minutes; the HTTP bindings write a
// keep-alive every heartbeat interval (egress.WithHeartbeatInterval), so
// that proxies and NATs keep the connection and a dead client is found
// (its stream slot freed). The gRPC binding pings the connection at that
// interval (keepalive.ServerParameters; grpc-go's default is 2 hours).
func TestA2AV1GRPCServerPingsHeldStream(t *testing.T) {
	p, started, release := heldPipeline(t, pipetest.WithEgress(egress.WithHeartbeatInterval(time.Second)))
	defer close(release)
	pc := &pingCounter{pings: make(chan struct{}, 1), acks: make(chan struct{}, 1), goaway: make(chan string, 1)}
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), dialCounted(pc))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	heldStream(t, ctx, conn, started)
	testkit.Receive(t, pc.pings, 10*time.Second, "a server PING on the connection of a held stream (heartbeat 1s)")
}

// TestA2AV1GRPCClientPingsKeepStream: a client that pings its connection
// every 10 s (keepalive.ClientParameters at grpc-go's minimum, as a
// client behind a NAT does) keeps a held stream open; grpc-go's default
// enforcement (a ping per 5 minutes at most) answers its fourth ping with
// GOAWAY too_many_pings, ending the stream UNAVAILABLE mid-task.
func TestA2AV1GRPCClientPingsKeepStream(t *testing.T) {
	t.Parallel() // 40 s of real pings: run beside the others
	p, started, release := heldPipeline(t)
	pc := &pingCounter{pings: make(chan struct{}, 1), acks: make(chan struct{}, 8), goaway: make(chan string, 1)}
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), dialCounted(pc),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := heldStream(t, ctx, conn, started)
	for i := range 4 {
		select {
		case <-pc.acks:
		case reason := <-pc.goaway:
			t.Fatalf("the server sent GOAWAY %q after %d keepalive pings of the client (one per 10 s)", reason, i)
		case <-ctx.Done():
			t.Fatal("no ack of the client's keepalive pings")
		}
	}
	close(release)
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("the held stream after the client's keepalive pings: %v", err)
		}
		if ev.GetStatusUpdate().GetStatus().GetState() == a2apb.TaskState_TASK_STATE_COMPLETED {
			return
		}
	}
}

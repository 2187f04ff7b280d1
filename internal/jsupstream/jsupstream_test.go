package jsupstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	js "github.com/e2a-pipeline/pipeline/internal/jsupstream"
)

type variant struct {
	binding     a2a.TransportProtocol
	v03, stream bool
}

func (v variant) String() string {
	s := "v1.0"
	if v.v03 {
		s = "v0.3"
	}
	s += "/" + string(v.binding)
	if !v.stream {
		s += "/no-streaming"
	}
	return s
}

var (
	jsonrpc   = a2a.TransportProtocolJSONRPC
	httpjson  = a2a.TransportProtocolHTTPJSON
	grpcproto = a2a.TransportProtocolGRPC
	variants  = []variant{
		{jsonrpc, false, true}, {jsonrpc, false, false}, {jsonrpc, true, true}, {jsonrpc, true, false},
		{httpjson, false, true}, {httpjson, false, false},
		{grpcproto, false, true}, {grpcproto, false, false},
	}
)

// server starts one node server for the variant (startup is the slow
// part: the tests share one per variant).
func (v variant) server(t *testing.T) (*js.Server, *a2aclient.Client) {
	t.Helper()
	s := js.Start(t, js.Options{Binding: v.binding, V03: v.v03, NoStreaming: !v.stream, SlowInterval: 5 * time.Millisecond})
	return s, up.Connect(t, s.BaseURL(), v.v03)
}

func record(t *testing.T, s *js.Server) js.Record {
	t.Helper()
	r, err := s.Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestJSUpstream: @a2a-js/sdk's server on each of its three transports
// (JSON-RPC, HTTP+JSON, gRPC), driven by a2a-go/v2's client from its card,
// v1.0 and v0.3, with and without streaming: every single-turn
// scenario's exact content (streamed event by event, and as SendMessage's
// task), ask and auth continued on the same task, slow canceled.
func TestJSUpstream(t *testing.T) {
	for _, vr := range variants {
		t.Run(vr.String(), func(t *testing.T) {
			s, c := vr.server(t)
			up.SingleTurns(t, c, vr.stream)
			t.Run("ask", func(t *testing.T) { ask(t, s, c, vr.stream) })
			t.Run("auth", func(t *testing.T) { auth(t, s, c, vr.stream) })
			t.Run("slow", func(t *testing.T) { slow(t, s, c, vr.stream) })
			if vr.stream {
				t.Run("resubscribe", func(t *testing.T) { up.ResubscribeSlow(t, c) })
			}
		})
	}
}

func ask(t *testing.T, s *js.Server, c *a2aclient.Client, streaming bool) {
	first, _ := up.AskTurns(t, c, streaming)
	r := record(t, s)
	last, call := r.Executions[len(r.Executions)-1], r.Calls[len(r.Calls)-1]
	if last.Scenario != up.Answer || !last.Continued || last.TaskID != string(first.Task.TaskID) ||
		len(last.History) < 2 || last.History[0] != "ask: hi" || last.History[len(last.History)-1] != "Ada" {
		t.Errorf("agent's second turn %+v", last)
	}
	if call.TaskID != string(first.Task.TaskID) || call.ContextID != first.Task.ContextID {
		t.Errorf("second call %+v, want task %s context %s", call, first.Task.TaskID, first.Task.ContextID)
	}
}

func auth(t *testing.T, s *js.Server, c *a2aclient.Client, streaming bool) {
	first, _ := up.AuthTurns(t, c, streaming)
	r := record(t, s)
	if last := r.Executions[len(r.Executions)-1]; last.Scenario != up.Authed || last.TaskID != string(first.Task.TaskID) || last.Text != "token-1" {
		t.Errorf("agent's second turn %+v", last)
	}
}

func slow(t *testing.T, s *js.Server, c *a2aclient.Client, streaming bool) {
	id := up.CancelSlow(t, c, streaming)
	if r := record(t, s); len(r.Cancels) != 1 || r.Cancels[0] != string(id) {
		t.Errorf("cancels %v, want [%s]", r.Cancels, id)
	}
}

// TestJSBearer: with a bearer token required, the card declares the
// scheme and requirement as @a2a-js/sdk writes them (proto JSON:
// "schemes": {"bearer": {}}), which a2a-go/v2 v2.4.0's card parser
// refuses (it reads the scopes as a JSON array): a client of such an
// agent must read its card tolerantly. On each binding, a call without
// the token is refused (HTTP 401, gRPC UNAUTHENTICATED) and recorded as
// refused; with it, served.
func TestJSBearer(t *testing.T) {
	for _, b := range []a2a.TransportProtocol{jsonrpc, httpjson, grpcproto} {
		t.Run(string(b), func(t *testing.T) { bearer(t, b) })
	}
}

func bearer(t *testing.T, b a2a.TransportProtocol) {
	s := js.Start(t, js.Options{Binding: b, Bearer: "s3cret"})
	ctx := context.Background()
	_, err := agentcard.DefaultResolver.Resolve(ctx, s.BaseURL())
	if err == nil || !strings.Contains(err.Error(), "securityRequirements") {
		t.Errorf("a2a-go/v2 read the SDK's security requirements (%v): the interop gap this test documents is gone", err)
	}
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(s.InterfaceURL(), b)},
		grpcv1.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	if _, err := c.SendMessage(ctx, up.Msg("hi")); err == nil {
		t.Fatal("a call without the token was served")
	}
	ctx = a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"authorization": {"Bearer s3cret"}})
	if _, err := c.SendMessage(ctx, up.Msg("hi")); err != nil {
		t.Fatal(err)
	}
	r := record(t, s)
	if len(r.Calls) != 2 || !r.Calls[0].Refused || r.Calls[1].Refused || r.Calls[1].Headers["authorization"] != "Bearer s3cret" {
		t.Errorf("calls %+v", r.Calls)
	}
}

func TestJSOptionsRefused(t *testing.T) {
	for _, o := range []js.Options{{SlowChunks: -1}, {Binding: "SOAP"}} {
		if _, err := js.New(o); !errors.Is(err, js.ErrInvalidOption) {
			t.Errorf("New(%+v): %v, want %v", o, err, js.ErrInvalidOption)
		}
	}
}

package a2aupstream

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Paths of the HTTP bindings under the server's base URL.
const (
	JSONRPCPath  = "/a2a/jsonrpc"
	HTTPJSONPath = "/a2a/rest"
)

// Server is one upstream A2A agent on loopback: a2a-go/v2's server with
// the scenario executor, one binding, its agent card, and a record of the
// calls it received.
type Server struct {
	opts    Options
	base    string // the card's (and the HTTP bindings') base URL
	iface   string // the A2A interface URL the card declares
	httpSrv *http.Server
	grpcSrv *grpc.Server
	closing chan struct{}
	once    sync.Once

	// refusals: what a2a-go's handler refused a message with (Refusals).
	refusals chan error

	mu      sync.Mutex
	hold    chan struct{}  // HoldAsks: closed by release
	holding sync.WaitGroup // the task store updates held
	calls   []Call
	execs   []Execution
	cancels []a2a.TaskID
	parks   map[a2a.TaskID]*parking
	fault   Fault
	left    int // calls the fault still answers; -1: every call
	faulted int
	races   int // RaceCancels: CancelTasks still to answer as raced
}

// Call is one A2A call the server received.
type Call struct {
	Method    string       // SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, ListTasks…
	TaskID    a2a.TaskID   // the task the call names (the message's taskId, or the request's id)
	ContextID string       // the message's contextId
	Text      string       // the message's first text part
	Message   *a2a.Message // the message sent, for SendMessage and SendStreamingMessage
	Header    http.Header  // the HTTP headers or gRPC metadata it carried
	Refused   bool         // refused for missing or wrong credentials
}

// Execution is one turn the agent ran, with what it saw.
type Execution struct {
	Scenario  string
	TaskID    a2a.TaskID
	ContextID string
	Message   *a2a.Message   // the user message of the turn
	History   []*a2a.Message // the task's history given to the agent (a continuation)
	Continued bool           // the turn continues an existing task
}

// parking is an execution waiting in auth-required for its credential.
type parking struct {
	task   a2a.TaskID
	answer chan *a2a.Message
	gone   chan struct{} // closed when the execution stops waiting
}

// Start starts a server for a test and closes it at the test's cleanup;
// options it cannot serve fail the test.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// New starts a server on loopback ports chosen by the system; Close stops
// it.
func New(o Options) (*Server, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	s := &Server{opts: o, closing: make(chan struct{}), refusals: make(chan error, 64), parks: map[a2a.TaskID]*parking{}}
	s.setFault(o.Fault)
	cardLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.base = "http://" + cardLn.Addr().String()
	if o.TLS != nil {
		s.base = "https://" + cardLn.Addr().String()
		cardLn = tls.NewListener(cardLn, o.TLS)
	}
	store := holdingStore{Store: taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()}), s: s}
	h := &handler{s: s, RequestHandler: a2asrv.NewHandler(&executor{s: s}, a2asrv.WithLogger(o.Logger), a2asrv.WithTaskStore(store))}
	mux := http.NewServeMux()
	switch o.Binding {
	case GRPC:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = cardLn.Close()
			return nil, err
		}
		s.iface = ln.Addr().String()
		gopts := []grpc.ServerOption{grpc.UnaryInterceptor(s.faultUnary), grpc.StreamInterceptor(s.faultStream)}
		if o.TLS != nil {
			gopts = append(gopts, grpc.Creds(credentials.NewTLS(o.TLS)))
		}
		s.grpcSrv = grpc.NewServer(gopts...)
		if o.V03 {
			grpcv0.NewHandler(h).RegisterWith(s.grpcSrv)
		} else {
			grpcv1.NewHandler(h).RegisterWith(s.grpcSrv)
		}
		go func() { _ = s.grpcSrv.Serve(ln) }()
	case HTTPJSON:
		s.iface = s.base + HTTPJSONPath
		rest := a2asrv.NewRESTHandler(h)
		if o.V03 {
			rest = a2av0.NewRESTHandler(h)
		}
		mux.Handle(HTTPJSONPath+"/", s.faulty(http.StripPrefix(HTTPJSONPath, rest)))
	default:
		s.iface = s.base + JSONRPCPath
		rpc := a2asrv.NewJSONRPCHandler(h)
		if o.V03 {
			rpc = a2av0.NewJSONRPCHandler(h)
		}
		mux.Handle(JSONRPCPath, s.faulty(s.wire(rpc, false)))
	}
	card, err := s.cardHandler()
	if err != nil {
		_ = cardLn.Close()
		s.stopGRPC()
		return nil, err
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, s.wire(card, true))
	s.httpSrv = &http.Server{Handler: mux, ErrorLog: slogLogger(o)}
	go func() { _ = s.httpSrv.Serve(cardLn) }()
	return s, nil
}

// Card is the agent card the server publishes (in v1.0 form; a V03 server
// serves its v0.3 translation).
func (s *Server) Card() *a2a.AgentCard {
	card := &a2a.AgentCard{
		Name:        "a2aupstream " + string(s.opts.Binding),
		Description: "Test agent: stream, tool, ask, auth, fail, slow, message, file, echo scenarios",
		Version:     "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(s.iface, s.opts.Binding),
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: !s.opts.NoStreaming},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID: "scenarios", Name: "Scenarios", Tags: []string{"test"},
			Description: "Answers by the prefix of the message: " + fmt.Sprint(scenarios),
			Examples:    []string{"stream: hello", "ask: hi"},
		}},
	}
	if s.opts.V03 {
		card.SupportedInterfaces[0].ProtocolVersion = "0.3.0"
	}
	if s.opts.Bearer != "" || s.opts.Token != nil {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{"bearer": {}}}
	}
	if s.opts.Token != nil && s.opts.OAuthTokenURL != "" {
		flow := a2a.ClientCredentialsOAuthFlow{TokenURL: s.opts.OAuthTokenURL, Scopes: map[string]string{}}
		for _, sc := range s.opts.OAuthScopes {
			flow.Scopes[sc] = "the scope " + sc
		}
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"oauth": a2a.OAuth2SecurityScheme{Flows: flow}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{"oauth": s.opts.OAuthScopes}}
	}
	return card
}

func (s *Server) cardHandler() (http.Handler, error) {
	card := s.Card()
	var h http.Handler = a2asrv.NewStaticAgentCardHandler(card)
	if s.opts.V03 {
		legacy := a2av0.FromV1AgentCard(card)
		legacy.AdditionalInterfaces = nil
		if s.opts.Bearer != "" {
			legacy.SecuritySchemes = a2alegacy.NamedSecuritySchemes{"bearer": a2alegacy.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
			legacy.Security = []a2alegacy.SecurityRequirements{{"bearer": {}}}
		}
		b, err := json.Marshal(legacy)
		if err != nil {
			return nil, err
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		})
	}
	return s.faultyCard(h), nil
}

// BaseURL is the server's base URL: agentcard.Resolver.Resolve takes it
// (and appends /.well-known/agent-card.json).
func (s *Server) BaseURL() string { return s.base }

// CardURL is the full URL of the agent card.
func (s *Server) CardURL() string { return s.base + a2asrv.WellKnownAgentCardPath }

// InterfaceURL is the A2A endpoint the card declares (host:port for gRPC).
func (s *Server) InterfaceURL() string { return s.iface }

// Close stops the server: waiting and slow executions end (failed),
// connections close.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		err = s.httpSrv.Close()
		s.stopGRPC()
	})
	return err
}

func (s *Server) stopGRPC() {
	if s.grpcSrv != nil {
		s.grpcSrv.Stop()
	}
}

// authorized reports whether h carries the credentials the options ask for.
func (s *Server) authorized(h http.Header) bool {
	if s.opts.Bearer != "" && h.Get("Authorization") != "Bearer "+s.opts.Bearer || s.opts.Token != nil && !s.opts.Token(h) {
		return false
	}
	for k, v := range s.opts.Headers {
		if h.Get(k) != v {
			return false
		}
	}
	return true
}

// HoldAsks holds, from now on, a2a-go/v2's server between storing a task
// in input-required (GetTask shows it) and counting its execution as ended,
// until release, which waits until what it held went on. In that window the
// server refuses a message that continues the task ("task execution is
// already in progress", an internal error to the client): a window a client
// polling GetTask can otherwise hit only by chance.
func (s *Server) HoldAsks() (release func()) {
	h := make(chan struct{})
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold = nil
			s.mu.Unlock()
			close(h)
			s.holding.Wait()
		})
	}
}

// holdAsk waits while HoldAsks holds, or until the server closes.
func (s *Server) holdAsk() {
	s.mu.Lock()
	h := s.hold
	if h != nil {
		s.holding.Add(1)
	}
	s.mu.Unlock()
	if h == nil {
		return
	}
	defer s.holding.Done()
	select {
	case <-h:
	case <-s.closing:
	}
}

// Refusals receives the errors a2a-go/v2's handler refused a
// SendMessage or SendStreamingMessage with, as the handler returns them
// (the client has them a moment later); at most 64 not yet received are
// kept.
func (s *Server) Refusals() <-chan error { return s.refusals }

func (s *Server) refused(err error) {
	select {
	case s.refusals <- err:
	default:
	}
}

// Calls returns the calls received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsOf returns the calls of one method.
func (s *Server) CallsOf(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// LastMessage returns the last message a SendMessage or
// SendStreamingMessage carried (nil before any).
func (s *Server) LastMessage() *a2a.Message {
	calls := s.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Message != nil {
			return calls[i].Message
		}
	}
	return nil
}

// Executions returns the turns the agent ran, in order.
func (s *Server) Executions() []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.execs)
}

// Cancels returns the tasks the agent was asked to cancel (CancelTask
// calls that reached it), in order.
func (s *Server) Cancels() []a2a.TaskID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cancels)
}

// RaceCancels makes the next n CancelTask calls fail as a2a-go's own
// server fails a cancel that races the end of the task's execution (the
// execution it signals has just closed its event queue: "cancelation
// failed: queue is closed", an internal error on the wire), without
// reaching the executor: the task is left as it was. It is the window
// an agent's CancelTask of a task that has just turned input-required can
// hit, held open.
func (s *Server) RaceCancels(n int) {
	s.mu.Lock()
	s.races = n
	s.mu.Unlock()
}

// raceCancel reports whether this CancelTask is answered as raced.
func (s *Server) raceCancel() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.races == 0 {
		return false
	}
	s.races--
	return true
}

func (s *Server) recordCall(c Call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *Server) recordExecution(e Execution) {
	s.mu.Lock()
	s.execs = append(s.execs, e)
	s.mu.Unlock()
}

func (s *Server) recordCancel(id a2a.TaskID) {
	s.mu.Lock()
	s.cancels = append(s.cancels, id)
	s.mu.Unlock()
}

func (s *Server) park(id a2a.TaskID) *parking {
	p := &parking{task: id, answer: make(chan *a2a.Message), gone: make(chan struct{})}
	s.mu.Lock()
	s.parks[id] = p
	s.mu.Unlock()
	return p
}

func (s *Server) unpark(p *parking) {
	s.mu.Lock()
	delete(s.parks, p.task)
	s.mu.Unlock()
	close(p.gone)
}

// parked returns the waiting execution a message answers, if any.
func (s *Server) parked(req *a2a.SendMessageRequest) *parking {
	if req == nil || req.Message == nil || req.Message.TaskID == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parks[req.Message.TaskID]
}

var errClosed = errors.New("a2aupstream: server closed")

// holdingStore is a2a-go's in-memory task store, holding an update to
// input-required after it is stored while HoldAsks holds.
type holdingStore struct {
	taskstore.Store
	s *Server
}

func (h holdingStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	v, err := h.Store.Update(ctx, req)
	if err == nil && req.Task != nil && req.Task.Status.State == a2a.TaskStateInputRequired {
		h.s.holdAsk()
	}
	return v, err
}

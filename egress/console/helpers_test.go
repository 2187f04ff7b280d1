package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

const (
	keyAlice = "ak_alice_console_test_0123456789"
	keyBob   = "ak_bob_console_test_0123456789ab"
	keyOps   = "ak_ops_console_test_audit_role_01"
)

// pipeline runs ingress, egress and the console over HTTP, with the demo
// agent, on an embedded JetStream server: what `e2a dev` wires.
type pipeline struct {
	url  string
	nc   *nats.Conn
	con  *console.Console
	reg  *prometheus.Registry
	auth bool

	mu    sync.Mutex
	froms []string // resume points asked of the console stream endpoint
	// e2aFroms and e2aCodes: resume points asked of GET
	// /v1/requests/{id}/stream and the statuses answered.
	e2aFroms []string
	e2aCodes []int
	dropped  bool
}

type pipelineOptions struct {
	auth bool
	// optional, with auth, enables the scheme none too (optional auth: a
	// caller without a credential is the anonymous principal).
	optional bool
	// keys are API keys beside alice's, bob's and ops's.
	keys []ingress.Credential
	// bearers are bearer tokens.
	bearers []ingress.Credential
	// authOpts configure the Auth of auth (ingress.WithAuthLimit…).
	authOpts []ingress.AuthOption
	console  []console.Option
	egress   []egress.Option
	noAgent  bool
	// dropAfter, when > 0, breaks the connection of the first GET
	// /v1/requests/{id}/stream after that many SSE events, as a network
	// failure would.
	dropAfter int
}

// authFunc adapts ingress.Auth to the console, as cmd/e2a does.
func authFunc(a *ingress.Auth) console.AuthFunc {
	return func(r *http.Request) (tenant.Principal, int, error) {
		p, err := a.Tenant(r)
		if err != nil {
			return tenant.Principal{}, ingress.AuthStatus(err), err
		}
		return p, 0, nil
	}
}

func startPipeline(t *testing.T, po pipelineOptions) *pipeline {
	t.Helper()
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	eopts := append([]egress.Option{egress.WithRegisterer(reg)}, po.egress...)
	iopts := []ingress.Option{ingress.WithRegisterer(reg)}
	copts := []console.Option{console.WithRegisterer(reg), console.WithGatherer(reg)}
	if po.auth {
		cfg := &ingress.AuthConfig{APIKeys: []ingress.Credential{
			{Principal: "alice", Secret: keyAlice}, {Principal: "bob", Secret: keyBob}, {Principal: "ops", Secret: keyOps},
		}, Roles: map[string][]string{"ops": {"audit"}}}
		cfg.APIKeys = append(cfg.APIKeys, po.keys...)
		cfg.BearerTokens = po.bearers
		if po.optional {
			cfg.Schemes = []string{"none", "apiKey"}
		}
		a, err := ingress.NewAuth(cfg, po.authOpts...)
		if err != nil {
			t.Fatal(err)
		}
		iopts = append(iopts, ingress.WithAuth(a))
		copts = append(copts, console.WithAuth(authFunc(a)), console.WithChallenge(a.SetChallenge))
		// Egress's own endpoints demand credentials too, as cmd/e2a wires
		// them: the console's stream view must pass the principal along.
		eopts = append(eopts, egress.WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
			p, err := a.Tenant(r)
			ingress.StripCredentialHeaders(r.Header)
			return p, err
		}))
	}
	eg, err := egress.New(nc, eopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eg.Close)
	in, err := ingress.New(nc, eg, iopts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	ctx, cancel := context.WithCancel(context.Background())
	copts = append(copts, console.WithDemo(mux, demo.Pool))
	con, err := console.New(ctx, nc, eg, append(copts, po.console...)...)
	if err != nil {
		t.Fatal(err)
	}
	con.Register(mux)
	p := &pipeline{nc: nc, con: con, reg: reg, auth: po.auth}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/console/api/requests/") && strings.HasSuffix(r.URL.Path, "/stream") {
			from := r.URL.Query().Get("from")
			if le := r.Header.Get("Last-Event-ID"); le != "" {
				from = "last-event-id:" + le
			}
			p.mu.Lock()
			p.froms = append(p.froms, from)
			p.mu.Unlock()
		}
		if strings.HasPrefix(r.URL.Path, "/v1/requests/") && strings.HasSuffix(r.URL.Path, "/stream") {
			p.serveE2AStream(mux, w, r, po.dropAfter)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	p.url = srv.URL
	done := make(chan struct{})
	if po.noAgent {
		close(done)
	} else {
		go func() {
			defer close(done)
			_ = agent.Run(ctx, nc, demo.Pool, demo.New(), agent.WithMetrics(reg))
		}()
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		con.Close()
		<-done
	})
	return p
}

func (p *pipeline) streamFroms() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.froms...)
}

// do sends a request with optional headers ("Name", "value", …).
func (p *pipeline) do(t *testing.T, method, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return testkit.Do(t, method, p.url+path, body, hdr...)
}

// submit posts an E2A request (body as given) and returns its id.
func (p *pipeline) submit(t *testing.T, body string, hdr ...string) string {
	t.Helper()
	resp, b := p.do(t, "POST", "/v1/requests", body, append([]string{"Content-Type", "application/json"}, hdr...)...)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/requests: %d %s", resp.StatusCode, b)
	}
	var acc struct {
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(b, &acc); err != nil || acc.RequestID == "" {
		t.Fatalf("accepted body %s: %v", b, err)
	}
	return acc.RequestID
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, d, what, cond)
}

// waitFinal waits until the index shows every id final.
func waitFinal(t *testing.T, p *pipeline, ids ...string) map[string]console.Entry {
	t.Helper()
	out := map[string]console.Entry{}
	waitFor(t, 20*time.Second, "final entries in the index", func() bool {
		for _, id := range ids {
			if _, ok := out[id]; ok {
				continue
			}
			e, err := p.con.Lookup(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if e != nil && (e.Status == console.StatusSucceeded || e.Status == console.StatusFailed) {
				out[id] = *e
			}
		}
		return len(out) == len(ids)
	})
	waitIndexed(t, p, ids...)
	return out
}

// waitIndexed waits until the list (newest first, pages of MaxPageSize)
// shows every id and the index consumer has acknowledged every request
// stored: Lookup reads E2A_REQUESTS, the list reads the index, which
// trails it by a batch, and a batch's task, session and context pointers
// are stored after its records (a pointer's publish not acknowledged is
// retried with the batch, which is acknowledged once all are stored: a
// run under load listed a request whose session pointer was still to
// come, "index update failed, retrying … timeout waiting for ack").
func waitIndexed(t *testing.T, p *pipeline, ids ...string) {
	t.Helper()
	js := natstest.JetStream(t, p.nc)
	waitFor(t, 20*time.Second, "every request in the index", func() bool {
		c, err := js.Consumer(context.Background(), streams.RequestsStream, console.RequestsConsumer)
		if err != nil {
			return false
		}
		if info, err := c.Info(context.Background()); err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
			return false
		}
		seen := map[string]bool{}
		var before uint64
		for {
			pg, err := p.con.List(context.Background(), console.Query{Limit: console.MaxPageSize, Before: before})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range pg.Entries {
				seen[e.RequestID] = true
			}
			if pg.Next == 0 {
				break
			}
			before = pg.Next
		}
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return true
	})
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	id, event, data string
}

// readSSE reads the events (not comments) of an SSE answer with the shared
// parser.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, e := range testkit.Events(testkit.MustReadSSE(t, r)) {
		out = append(out, sseEvent{id: e.ID, event: e.Event, data: e.Data})
	}
	return out
}

// serveE2AStream serves GET /v1/requests/{id}/stream, recording the resume
// point and the status, and breaking the first connection after dropAfter
// events when asked to.
func (p *pipeline) serveE2AStream(mux http.Handler, w http.ResponseWriter, r *http.Request, dropAfter int) {
	from := r.URL.Query().Get("from")
	if le := r.Header.Get("Last-Event-ID"); le != "" {
		from = "last-event-id:" + le
	}
	p.mu.Lock()
	drop := dropAfter > 0 && !p.dropped
	p.dropped = p.dropped || drop
	p.e2aFroms = append(p.e2aFroms, from)
	p.mu.Unlock()
	rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	if drop {
		rec.dropAfter = dropAfter
	}
	defer func() {
		p.mu.Lock()
		p.e2aCodes = append(p.e2aCodes, rec.code)
		p.mu.Unlock()
	}()
	mux.ServeHTTP(rec, r)
}

func (p *pipeline) e2aStreams() ([]string, []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.e2aFroms...), append([]int(nil), p.e2aCodes...)
}

// statusWriter records the status; with dropAfter > 0 it aborts the
// connection (http.ErrAbortHandler) once that many SSE events were written.
type statusWriter struct {
	http.ResponseWriter
	code      int
	dropAfter int
	events    int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.dropAfter > 0 && s.events >= s.dropAfter {
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	s.events += bytes.Count(b, []byte("\nid: ")) + bytes.Count(b[:min(len(b), 4)], []byte("id: "))
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// consoleError is the code and message of b, an error body in the
// console's JSON shape ("", "" for any other body).
func consoleError(b []byte) (code, message string) {
	var e struct {
		Error *struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil {
		return "", ""
	}
	return e.Error.Code, e.Error.Message
}

// serveConsole serves con's page and API alone on a test server, closed
// with the test.
func serveConsole(t *testing.T, con *console.Console) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	con.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// helloError is the error body of the protocol "hello".
type helloError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

func helloRefuse(w http.ResponseWriter, f host.Refusal) {
	f.SetHeaders(w.Header())
	writeHelloError(w, f.Status, f.Code, f.Message)
}

func writeHelloError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(helloError{Error: msg, Code: code})
}

// helloDoor is the front door of the protocol "hello": POST /hello with
// {"text":"…"} submits the text to an agent pool (?agent=, else the
// routing rule's) and answers with the request's frames as E2A NDJSON.
func helloDoor(h host.Host) []host.Route {
	door := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The gate: authentication and rate limit, refused in the
		// protocol's own error shape.
		c, ok := h.Admit(w, r, "hello", helloRefuse)
		if !ok {
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.MaxBody()))
		if err != nil {
			writeHelloError(w, http.StatusRequestEntityTooLarge, "body_too_large", err.Error())
			return
		}
		var req struct{ Text string }
		if err := json.Unmarshal(body, &req); err != nil || req.Text == "" {
			writeHelloError(w, http.StatusBadRequest, "invalid_request", "a text is required")
			return
		}
		// The request as an E2A envelope, normalized by the host's
		// normalizer: ids, caller, provenance, routing.
		envelope, _ := json.Marshal(e2a.Envelope{Method: "hello", IsStream: true, Params: map[string]any{"text": req.Text}})
		res, err := h.Normalizer().FromE2A(c.Input(r, envelope, r.URL.Query().Get("agent")))
		if err != nil {
			writeHelloError(w, http.StatusBadRequest, "invalid_request", egress.ClientMessage(err))
			return
		}
		// One call: the stream slot, the subscription to the frames and
		// the publish.
		sub, err := c.Submit(r.Context(), host.Submission{Pool: res.Pool, Envelope: res.Envelope, Slot: true, Prepare: true})
		if err != nil {
			status, code := egress.Classify(err)
			writeHelloError(w, status, code, egress.ClientMessage(err))
			return
		}
		defer sub.Done()
		// The answer, from the frames, with one of egress's renderers.
		h.Serve(w, r.WithContext(sub.Context()), sub.RequestID, egress.FormatE2ANDJSON,
			func(o *render.Output) render.Renderer { return egress.NewE2ANDJSON(o) })
	})
	return []host.Route{{Method: http.MethodPost, Path: "/hello", Handler: door}}
}

// A protocol's front door is written against the host's interfaces only:
// a RouteServer (here a RoutesFunc, helloDoor) whose routes use the gate
// (Admit), the normalizer, the submission (Caller.Submit) and the answer
// from the frames (Serve). Registered beside the pipeline's protocols,
// ingress mounts it and is its Host. Here it runs over an embedded
// JetStream server with an agent pool "shout"; the client reads the answer
// as NDJSON frames.
func ExampleRoutesFunc() {
	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The agent pool "shout": the text's words in capitals.
	shout := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for _, word := range strings.Fields(env.ParamString("text")) {
			if err := w.Chunk(e2a.DeltaText, strings.ToUpper(word)+" "); err != nil {
				return err
			}
		}
		return w.Complete(map[string]any{"method": env.Method})
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "shout", shout, agent.WithCoalesce(0, 0)) }()

	// The protocol registered beside the pipeline's (its answers are
	// E2A's format, so it declares no format of its own), and ingress
	// (with egress answering) serving them all.
	reg, err := protocols.New(append(protocols.All(), protocols.Protocol{Name: "hello", Title: "Hello", Version: "1",
		Adapter: "e2a", Paths: []string{"/hello"}, Service: host.RoutesFunc(helloDoor)})...)
	if err != nil {
		panic(err) // e.g. a name or a path another protocol has
	}
	eg, err := egress.New(mem.Conn)
	if err != nil {
		panic(err)
	}
	in, err := ingress.New(mem.Conn, eg, ingress.WithProtocols(reg))
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	front := httptest.NewServer(mux)
	defer front.Close()

	resp, err := http.Post(front.URL+"/hello?agent=shout", "application/json", strings.NewReader(`{"text":"hello from a new protocol"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue // a heartbeat
		}
		f, err := e2a.ResponseFromJSON(sc.Bytes())
		if err != nil {
			fmt.Println(err)
			continue
		}
		if c, err := f.Chunk(); err == nil {
			fmt.Printf("%d %s %q\n", f.Sequence, f.ResponseKind, c.Delta)
		} else {
			fmt.Printf("%d %s %s %s\n", f.Sequence, f.ResponseKind, f.Status, f.Body)
		}
	}
	resp.Body.Close()

	resp, err = http.Post(front.URL+"/hello", "application/json", strings.NewReader(`{}`))
	if err != nil {
		panic(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.StatusCode, " ", string(b))

	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// 200 application/x-ndjson
	// 0 e2a.chunk "HELLO "
	// 1 e2a.chunk "FROM "
	// 2 e2a.chunk "A "
	// 3 e2a.chunk "NEW "
	// 4 e2a.chunk "PROTOCOL "
	// 5 e2a.complete succeeded {"result":{"method":"hello"}}
	// 400 {"error":"a text is required","code":"invalid_request"}
	// Run: <nil>
}

// A JSON-RPC call answers an error of Submitter.Submit with
// AnswerSubmitError (ReplySubmitted does so for it): the pipeline's
// JSON-RPC error, with an HTTP status and Retry-After where the error is
// one to retry. HTTPReply is the Reply of a single call over HTTP.
func ExampleAnswerSubmitError() {
	for _, err := range []error{
		host.ErrTooManyStreams,
		fmt.Errorf("%w: %q", host.ErrUnknownPool, "nopool"),
		host.ErrConflict,
		host.ErrBackpressure,
	} {
		rec := httptest.NewRecorder()
		host.AnswerSubmitError(host.HTTPReply(rec, json.RawMessage(`7`)), err)
		fmt.Printf("%d Retry-After=%q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}

	// A submission that succeeded: its warning (the pool has no live
	// worker now) is set on the answer.
	rec := httptest.NewRecorder()
	sub := host.NewSubmitted(host.Accepted{RequestID: "req-1", Pool: "chat", Warning: "no live worker in pool chat"}, context.Background(), nil)
	ok := host.ReplySubmitted(host.HTTPReply(rec, json.RawMessage(`8`)), sub, nil)
	fmt.Println(ok, rec.Header().Get(host.HeaderWarning))
	// Output:
	// 429 Retry-After="1" {"jsonrpc":"2.0","id":7,"error":{"code":-32029,"message":"too many concurrent streams for this principal"}}
	// 200 Retry-After="" {"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params: unknown agent pool: \"nopool\""}}
	// 200 Retry-After="" {"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params: the id (Idempotency-Key or contextId) is already in use; choose another","data":{"conflict":true,"retryable":false}}}
	// 503 Retry-After="1" {"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"the pipeline could not accept the request; retry later","data":{"retryable":true}}}
	// true no live worker in pool chat
}

// A Refusal is protocol neutral: each protocol writes it in its own error
// shape (a Refuse), with its headers (SetHeaders: the gate's challenges as
// WWW-Authenticate, its wait as Retry-After in whole seconds rounded up).
// RefuseJSONRPC is the shape of the JSON-RPC protocols.
func ExampleRefusal_SetHeaders() {
	limited := host.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "rate limit exceeded",
		Retryable: true, RPCCode: jsonrpc.CodeRateLimited, RetryAfter: 2500 * time.Millisecond}
	fmt.Println(limited.RetryAfterSeconds(), host.WaitSeconds(0), host.WaitSeconds(time.Millisecond))

	// A protocol of its own shape.
	rec := httptest.NewRecorder()
	helloRefuse(rec, limited)
	fmt.Print(rec.Code, " Retry-After=", rec.Header().Get("Retry-After"), " ", rec.Body)

	// A JSON-RPC protocol's, for a refusal for want of credentials.
	rec = httptest.NewRecorder()
	host.RefuseJSONRPC(rec, nil, host.Refusal{Status: http.StatusUnauthorized, Code: "unauthenticated",
		Message: "authentication required", RPCCode: jsonrpc.CodeInvalidRequest, Challenges: []string{`Bearer realm="e2a"`}})
	fmt.Print(rec.Code, " WWW-Authenticate=", rec.Header().Get("WWW-Authenticate"), " ", rec.Body)
	fmt.Println(errors.Is(host.ErrContextConflict, host.ErrConflict))
	// Output:
	// 3 0 1
	// 429 Retry-After=3 {"error":"rate limit exceeded","code":"rate_limited"}
	// 401 WWW-Authenticate=Bearer realm="e2a" {"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"authentication required"}}
	// true
}

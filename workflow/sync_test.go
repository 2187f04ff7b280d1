package workflow

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// announced reports whether operation opID's function_call and
// function_response are among frames.
func announced(frames []*e2a.Response, opID string) (call, response bool) {
	for _, f := range frames {
		if f.ResponseKind != e2a.KindChunk {
			continue
		}
		c, err := f.Chunk()
		if err != nil || c.DeltaKind != e2a.DeltaTool {
			continue
		}
		d, _ := c.Delta.(map[string]any)
		if fid, _ := d["id"].(string); !strings.HasPrefix(fid, opID+"#") {
			continue
		}
		switch d["type"] {
		case e2a.ToolFunctionCall:
			call = true
		case e2a.ToolFunctionResponse:
			response = true
		}
	}
	return call, response
}

// storedFrames reads the frames of request id directly from
// E2A_RESPONSES.
func storedFrames(src *StreamFrames, id string) func() ([]*e2a.Response, error) {
	return func() ([]*e2a.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return src.Frames(ctx, id)
	}
}

// checkAnnounced records, at the moment an operation acts, whether its
// function_call frame (and not yet its function_response) is stored.
type checkAnnounced struct {
	stored func() ([]*e2a.Response, error)
	seen   chan string // one line per operation acting: "" when announced
}

func newCheck(stored func() ([]*e2a.Response, error)) *checkAnnounced {
	return &checkAnnounced{stored: stored, seen: make(chan string, 8)}
}

func (c *checkAnnounced) check(opID string) {
	frames, err := c.stored()
	call, resp := announced(frames, opID)
	switch {
	case err != nil:
		c.seen <- fmt.Sprintf("%s: reading the frames: %v", opID, err)
	case !call || resp:
		c.seen <- fmt.Sprintf("%s acted with function_call stored %v, function_response stored %v", opID, call, resp)
	default:
		c.seen <- ""
	}
}

// wait checks that n operations acted, each announced.
func (c *checkAnnounced) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		if msg := testkit.Receive(t, c.seen, 5*time.Second, "an operation did not act"); msg != "" {
			t.Error(msg)
		}
	}
}

// checkStorage is a Storage that checks, as StoreData writes, that the
// operation's start is stored.
type checkStorage struct{ c *checkAnnounced }

func (s checkStorage) Kinds() []string { return []string{StorageLocal} }

func (s checkStorage) Store(_ context.Context, _ StoreScope, _, key string, _ []byte) (string, error) {
	s.c.check("keep")
	return "mem:" + key, nil
}

// payServer is an API whose POST /pay checks, when hit, that operation
// pay is announced.
func payServer(t *testing.T, c *checkAnnounced) *httptest.Server {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.check("pay")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"paid":true}`)
	}))
	t.Cleanup(api.Close)
	return api
}

// payAndKeep is a workflow of an ApiCall (pay) and a StoreData (keep)
// after a local operation (the first frames are not the call's).
func payAndKeep(apiURL string) string {
	return lines(
		op("wait", `{"Wait":{"duration":1}}`),
		op("pay", `{"ApiCall":{"method":"POST","url":"`+apiURL+`/pay","body":{"amount":1},"outputPath":"/workflow/pay"}}`),
		op("keep", `{"StoreData":{"inputPath":"/workflow/pay","storage":"localStorage","key":"receipt"}}`),
		begin("wait", "pay", "keep"))
}

// lazyWriter stores its frames (in store) only at Sync or at the
// final frame, as the runtime's writer may when its stream is slow: what
// store holds when an operation acts is what a redelivery after a crash
// at that moment would find.
type lazyWriter struct {
	store   agenttest.Writer
	mu      sync.Mutex
	pending []func() error
}

func (w *lazyWriter) queue(f func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, f)
	return nil
}

func (w *lazyWriter) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.pending {
		if err := f(); err != nil {
			return err
		}
	}
	w.pending = nil
	return nil
}

func (w *lazyWriter) Chunk(kind string, delta any) error {
	return w.queue(func() error { return w.store.Chunk(kind, delta) })
}

func (w *lazyWriter) Write(kind, status string, body any, final bool) error {
	if !final {
		return w.queue(func() error { return w.store.Write(kind, status, body, final) })
	}
	if err := w.Sync(); err != nil {
		return err
	}
	return w.store.Write(kind, status, body, final)
}

func (w *lazyWriter) Complete(result any) error {
	if err := w.Sync(); err != nil {
		return err
	}
	return w.store.Complete(result)
}

func (w *lazyWriter) Fail(code, message string, retryable bool) error {
	if err := w.Sync(); err != nil {
		return err
	}
	return w.store.Fail(code, message, retryable)
}

func (w *lazyWriter) SetMetadata(m map[string]any) error { return w.store.SetMetadata(m) }
func (w *lazyWriter) ResumeAfter() int64                 { return -1 }

// The executor syncs the frames before each operation acting outside it:
// with a writer that stores only when asked (lazyWriter), the ApiCall's
// server and the StoreData's storage find the operation's function_call
// stored when they are reached.
func TestExecutorSyncsBeforeActing(t *testing.T) {
	w := &lazyWriter{}
	c := newCheck(func() ([]*e2a.Response, error) { return w.store.Frames(), nil })
	api := payServer(t, c)
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Storage: checkStorage{c}})
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "lazy-1", Method: Method, UserID: "agent-1",
		Params: map[string]any{"workflow": payAndKeep(api.URL)}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := exec.Serve(tctx(t), env, w); err != nil {
		t.Fatal(err)
	}
	if !w.store.Final() || w.store.Kinds()[len(w.store.Kinds())-1] != e2a.KindComplete {
		t.Fatalf("frames: %v", w.store.Kinds())
	}
	c.wait(t, 2)
}

// An ApiCall's server is hit, and a StoreData's storage written, only once
// the operation's function_call frame is in E2A_RESPONSES (read directly
// when hit): a worker dying during the call leaves the frame behind.
func TestOperationActsAfterItsStartIsStored(t *testing.T) {
	n := startNATS(t)
	const id = "announced-1"
	src := &StreamFrames{Conn: n.nc}
	c := newCheck(storedFrames(src, id))
	api := payServer(t, c)
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Storage: checkStorage{c}})
	runPool(t, n.connect(t), exec)

	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: id, Method: Method, UserID: "agent-1",
		Params: map[string]any{"workflow": payAndKeep(api.URL)}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
		t.Fatal(err)
	}
	final, err := (&API{Frames: src}).waitFinal(tctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if final.ResponseKind != e2a.KindComplete {
		t.Fatalf("final: %s", final.Body)
	}
	c.wait(t, 2)
}

// A worker that dies while an ApiCall is out (its connection closed when
// the server is hit, before the call's result is written) leaves the
// request to another worker, which finds its frames and ends it with
// agent_interrupted: the API is called once, never again.
func TestWorkerDyingDuringApiCallDoesNotCallAgain(t *testing.T) {
	n := startNATS(t)
	const id = "dies-during-call-1"
	src := &StreamFrames{Conn: n.nc}
	ncA := n.connect(t)
	var hits atomic.Int32
	hit := make(chan string, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			frames, err := storedFrames(src, id)()
			call, _ := announced(frames, "pay")
			switch {
			case err != nil:
				hit <- err.Error()
			case !call:
				hit <- "the API was hit before the function_call frame was stored"
			default:
				hit <- ""
			}
			ncA.Close() // worker A dies with the call out
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"paid":true}`)
	}))
	t.Cleanup(api.Close)
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1")})
	opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithHeartbeat(200 * time.Millisecond)}
	runPool(t, ncA, exec, opts...)

	wf := lines(op("pay", `{"ApiCall":{"method":"POST","url":"`+api.URL+`/pay","body":{"amount":1},"outputPath":"/workflow/pay"}}`), begin("pay"))
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: id, Method: Method, UserID: "agent-1",
		Params: map[string]any{"workflow": wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
		t.Fatal(err)
	}
	if msg := testkit.Receive(t, hit, 10*time.Second, "the API was not called"); msg != "" {
		t.Error(msg)
	}
	// Worker B takes the redelivery.
	runPool(t, n.connect(t), exec, opts...)
	final, err := (&API{Frames: src}).waitFinal(tctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := final.Error()
	if eb.Code != e2a.ErrCodeAgentInterrupted || !eb.Retryable {
		t.Errorf("final: %s", final.Body)
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("the API was called %d times, want 1", got)
	}
}

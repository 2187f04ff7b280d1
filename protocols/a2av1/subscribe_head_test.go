package a2av1_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestRESTSubscribeHead: a HEAD of an HTTP+JSON tasks/{id}:subscribe is
// answered as its GET opens (RFC 9110 §9.3.2), without the stream: for a
// running task 200 text/event-stream at once, the connection free for the
// client's next request while the task runs on; for an unknown task 404 and
// a finished one 400, as GET. The SDK's handler streamed the running task
// to its end into the void (net/http drops a HEAD's body), holding the
// connection, so the next request on it waited for the task to end; an
// unknown or finished task's HEAD was 200 text/event-stream.
func TestRESTSubscribeHead(t *testing.T) {
	release := make(chan struct{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "first"); err != nil {
			return err
		}
		if strings.Contains(fmt.Sprint(env.Params), "hold") {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return w.Complete(map[string]any{"content": "done"})
	}))
	done := finishedTask(t, p)
	defer close(release)

	// A running task: its stream stays open (the agent holds its turn).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+a2av1.Path+"/message:stream",
		strings.NewReader(`{"message":{"role":"ROLE_USER","messageId":"h1","parts":[{"text":"hold"}]}}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var ev struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	for sc.Scan() && ev.Task.ID == "" {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			_ = json.Unmarshal([]byte(data), &ev)
		}
	}
	if ev.Task.ID == "" {
		t.Fatalf("message:stream opened with no task: %v", sc.Err())
	}

	// One connection: the HEAD's, then the next request's.
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	call := func(method, path string) (int, http.Header) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		req, _ := http.NewRequestWithContext(rctx, method, p.URL+a2av1.Path+path, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, res.Header
	}
	status, hdr := call(http.MethodHead, "/tasks/"+ev.Task.ID+":subscribe")
	if status != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" || hdr.Get("Cache-Control") != "no-cache" {
		t.Errorf("HEAD of a running task's subscribe: %d %v; want 200 text/event-stream", status, hdr)
	}
	// The connection is free while the task runs (it waited for its end).
	if status, _ := call(http.MethodGet, "/tasks/"+ev.Task.ID); status != http.StatusOK {
		t.Errorf("GET the task after the HEAD: %d", status)
	}
	for _, c := range []struct {
		id     string
		status int
	}{{"no-such-task", http.StatusNotFound}, {done, http.StatusBadRequest}} {
		get, _ := call(http.MethodGet, "/tasks/"+c.id+":subscribe")
		head, hdr := call(http.MethodHead, "/tasks/"+c.id+":subscribe")
		if get != c.status || head != get || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("task %s: GET %d, HEAD %d %s; want both %d application/json", c.id, get, head, hdr.Get("Content-Type"), c.status)
		}
	}
}

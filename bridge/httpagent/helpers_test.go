package httpagent_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/proctest"
)

// startExample runs an example agent of examples/httpagent with its
// interpreter on a port of its choosing and returns its URL.
func startExample(t *testing.T, interpreter, script string) string {
	t.Helper()
	port := proctest.Start(t, interpreter, "../../examples/httpagent/"+script, "0")
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/"
}

// bridgePool serves pool on p from the HTTP agent at url, with quick
// retries.
func bridgePool(t *testing.T, p *pipetest.Pipeline, pool, url string, copts ...bridge.ClientOption) {
	t.Helper()
	client, err := bridge.NewClient(url, copts...)
	if err != nil {
		t.Fatal(err)
	}
	// As `e2a agent --http` serves it: with the conversation's history.
	convs, err := bridge.OpenConversations(context.Background(), p.JS, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	up, err := httpagent.New(client, httpagent.WithHistory(pool, convs))
	if err != nil {
		t.Fatal(err)
	}
	h, err := bridge.New(pool, up, bridge.WithRetry(3, 5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool(pool, h)
}

// sseFrames reads the frames of an E2A SSE stream.
func sseFrames(t *testing.T, r io.Reader) []*e2a.Response {
	t.Helper()
	var out []*e2a.Response
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			f, err := e2a.ResponseFromJSON([]byte(d))
			if err != nil {
				t.Fatalf("frame %q: %v", d, err)
			}
			out = append(out, f)
		}
	}
	return out
}

// recorder is an HTTP agent that keeps every body POSTed to it and answers
// the n-th POST (1-based) with answer(n), NDJSON frames.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

// newRecorder starts a recorder, closed when t ends.
func newRecorder(t *testing.T, answer func(n int) string) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := mustRead(r)
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, b)
		n := len(rec.bodies)
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(answer(n)))
	}))
	t.Cleanup(rec.Close)
	return rec
}

// Bodies are the bodies POSTed so far.
func (rec *recorder) Bodies() [][]byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.bodies)
}

func mustRead(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }

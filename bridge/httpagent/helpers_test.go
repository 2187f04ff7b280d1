package httpagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
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
	up, err := httpagent.New(client)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bridge.New(pool, up, bridge.WithRetry(3, 5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool(pool, h)
}

// answer is the E2A JSON answer of a finished request.
type answer struct {
	State  string          `json:"state"`
	Frames []*e2a.Response `json:"frames"`
}

func (a answer) final() *e2a.Response {
	if len(a.Frames) == 0 {
		return nil
	}
	return a.Frames[len(a.Frames)-1]
}

func (a answer) text() string {
	var b strings.Builder
	for _, f := range a.Frames {
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
			s, _ := c.Delta.(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// errorCode is the code of the final e2a.error ("" when it is none).
func (a answer) errorCode() (string, bool) {
	f := a.final()
	if f == nil || f.ResponseKind != e2a.KindError {
		return "", false
	}
	b, _ := f.Error()
	return b.Code, b.Retryable
}

// ask posts an E2A request to pool and waits for its answer.
func ask(t *testing.T, p *pipetest.Pipeline, pool, body string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/pools/"+pool+"/v1/requests?wait=true", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d: %s", resp.StatusCode, b)
	}
	return a
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

func mustRead(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }

package ingress_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// reviewCostFrames is the length of the answer of BenchmarkResumeNearEnd.
const reviewCostFrames = 10000

func resumePost(tb testing.TB, url, body string, hdr ...string) []testkit.SSEEvent {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/a2a", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	hdr = append([]string{"Accept", "text/event-stream", "Content-Type", "application/json", "Idempotency-Key", "cost-v03"}, hdr...)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	return testkit.Events(testkit.MustReadSSE(tb, resp.Body))
}

// BenchmarkResumeNearEnd: a v0.3 message/stream of a 10,000-chunk
// answer (a frame each), resumed after its last chunk's event: one frame
// to send, the 9,999 before it read by the reader on its way to the resume
// point and given to the stream's mapper (render.Primer), decoded.
func BenchmarkResumeNearEnd(b *testing.B) {
	p := pipetest.Start(b, pipetest.WithIngress(ingress.WithDefaultPool("answers")))
	p.Pool("answers", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range reviewCostFrames {
			if err := w.Chunk(e2a.DeltaText, "w"+strconv.Itoa(i)+" "); err != nil {
				return err
			}
			if err := w.Sync(); err != nil { // a frame each, as a model's tokens
				return err
			}
		}
		return w.Complete("done")
	}))
	body := `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","role":"user",` +
		`"messageId":"m-cost","parts":[{"kind":"text","text":"long"}]}}}`
	whole := resumePost(b, p.URL, body)
	var ids []string
	for _, e := range whole {
		if e.ID != "" {
			ids = append(ids, e.ID)
		}
	}
	final, err := strconv.Atoi(ids[len(ids)-1])
	if err != nil || final < reviewCostFrames {
		b.Fatalf("final event id %q", ids[len(ids)-1])
	}
	after := strconv.Itoa(final - 1) // the last chunk's sequence
	b.ResetTimer()
	for b.Loop() {
		rest := resumePost(b, p.URL, body, "Last-Event-ID", after)
		if len(rest) == 0 || len(rest) > 3 {
			b.Fatalf("resumed after %s: %d events", after, len(rest))
		}
	}
}

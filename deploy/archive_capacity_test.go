package deploy

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// variedPool answers each request with prose that differs per request:
// 24 chunks of 8–20 words taken at a random place of the project's own
// documents (seeded by the request id), then the final frame with the
// whole answer, as a model server's stream is stored. Real answers
// compress less than the demo's fixed text; this is nearer to them, but
// its phrases recur across requests (the documents hold about 60,000
// words, a batch 150 answers of about 340). saladPool draws every word at
// random from the same words instead: no phrase recurs, and prose has
// more structure than that, so it bounds real text from below.
const (
	variedPool = "varied"
	saladPool  = "salad"
)

func variedHandler(words []string, salad bool) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		var seed uint64
		for _, c := range env.RequestID {
			seed = seed*31 + uint64(c)
		}
		rnd := rand.New(rand.NewPCG(seed, 41))
		var answer strings.Builder
		for range 24 {
			at, n := rnd.IntN(len(words)-20), 8+rnd.IntN(13)
			picked := slices.Clone(words[at : at+n])
			if salad {
				for i := range picked {
					picked[i] = words[rnd.IntN(len(words))]
				}
			}
			chunk := strings.Join(picked, " ") + " "
			answer.WriteString(chunk)
			if err := w.Chunk(e2a.DeltaText, chunk); err != nil {
				return err
			}
		}
		return w.Complete(answer.String())
	})
}

// corpusWords returns the words of README.md and docs/*.md.
func corpusWords(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("../docs/*.md")
	var words []string
	for _, f := range append(files, "../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		words = append(words, strings.Fields(string(b))...)
	}
	return words
}

// TestArchiveCapacityPerRequest measures what the archive keeps per
// request against E2A_AUDIT: the demo's requests (the same answer each
// time, a best case) and the varied pool's (different prose per request),
// archived with the default batch size. docs/capacity.md quotes these
// figures; the test fails when they drift by more than 25 %.
func TestArchiveCapacityPerRequest(t *testing.T) {
	cfg := natstest.Config()
	p := startPipeline(t, cfg, true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	words := corpusWords(t)
	for _, pool := range []string{variedPool, saladPool} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := agent.Run(ctx, p.nc, pool, variedHandler(words, pool == saladPool), agent.WithConcurrency(32)); err != nil {
				t.Errorf("%s pool: %v", pool, err)
			}
		}()
	}
	// The archiver runs over each pool's requests once they are all in
	// E2A_AUDIT: its batches are cut by size, as at a steady rate with the
	// default interval. Run beside the requests with a short interval (100
	// ms, for speed), a loaded machine cut them by time, smaller, and the
	// varied pool's bytes per request rose 26 % (CI on 537075a).
	archiveAll := func() {
		stop := natstest.RunArchiver(t, p.nc, archive.WithFlushInterval(2*time.Second))
		natstest.WaitArchived(t, p.nc, p.streamInfo(t, streams.AuditStream).State.LastSeq)
		stop()
	}
	if p.streamInfo(t, streams.AuditStream).State.LastSeq > 0 {
		archiveAll()
	}
	const n = 300
	for _, c := range []struct {
		name, pool string
		want       float64 // E2A_ARCHIVE bytes per request, docs/capacity.md
	}{
		{"demo", "", readmeArchiveBytesPerRequest["demo"]},
		{"varied", variedPool, readmeArchiveBytesPerRequest["varied"]},
		{"salad", saladPool, readmeArchiveBytesPerRequest["salad"]},
	} {
		_, audit0 := p.streamState(t, streams.AuditStream)
		_, arch0 := p.streamState(t, streams.ArchiveStream)
		sendRequests(t, p, c.name, c.pool, n)
		p.waitAuditCopies(t)
		archiveAll()
		_, audit1 := p.streamState(t, streams.AuditStream)
		_, arch1 := p.streamState(t, streams.ArchiveStream)
		a, z := float64(audit1-audit0)/n, float64(arch1-arch0)/n
		t.Logf("%-6s E2A_AUDIT %6.0f B/request, E2A_ARCHIVE %5.0f B/request: %.1fx", c.name, a, z, a/z)
		if z < 0.75*c.want || z > 1.25*c.want {
			t.Errorf("%s: E2A_ARCHIVE %.0f B/request, docs/capacity.md says %.0f", c.name, z, c.want)
		}
	}
}

// sendRequests sends n E2A requests to pool (the default pool when empty)
// with ?wait=true, 16 at a time.
func sendRequests(t *testing.T, p *pipeline, prefix, pool string, n int) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	url := p.url + "/v1/requests?wait=true"
	if pool != "" {
		url += "&agent=" + pool
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			body := fmt.Sprintf(`{"request_id":"%s-%d","session_id":"sess-%d","method":"chat.send","params":{"text":"What is the weather in London tomorrow, and should I take an umbrella? (%d)"}}`, prefix, i, i%10, i)
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: %d", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
}

// readmeArchiveBytesPerRequest are docs/capacity.md's figures.
var readmeArchiveBytesPerRequest = map[string]float64{"demo": 320, "varied": 950, "salad": 1200}

package ingress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// e2a_ingress_publish_seconds is documented as "publish → PubAck (the
// durable accept; includes the quorum fsync)" (docs/operations.md) and
// registered as "Time from publish to PubAck for accepted requests"
// (ingress/metrics.go). The front door observed it around the whole of
// Server.publishAfter whatever its result: a request refused 413 before
// anything is published (over max_payload) was counted as a publish, so
// the histogram mixed refusals (and lookups, 503 timeouts) into the accept
// latency. An accepted request is counted once.
func TestPublishSecondsCountsAcceptedOnly(t *testing.T) {
	p := pipetest.Start(t)
	// 2 MiB of text: under ingress's 4 MiB body limit, over the embedded
	// server's 1 MiB max_payload.
	body := `{"request_id":"pub-metric-1","params":{"text":"` + strings.Repeat("x", 2<<20) + `"}}`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/requests?agent=demo", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of a request over max_payload: %d, want 413", resp.StatusCode)
	}
	if n := publishSamples(t, p); n != 0 {
		t.Fatalf("e2a_ingress_publish_seconds counted %d publish(es) for a request refused 413 before any publish "+
			"(documented: publish → PubAck of accepted requests)", n)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/requests?agent=demo", strings.NewReader(`{"request_id":"pub-metric-2","params":{"text":"hi"}}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("POST of a small request: %d", resp.StatusCode)
	}
	if n := publishSamples(t, p); n != 1 {
		t.Fatalf("e2a_ingress_publish_seconds counted %d publishes for one accepted request", n)
	}
}

// publishSamples is the sample count of e2a_ingress_publish_seconds.
func publishSamples(t *testing.T, p *pipetest.Pipeline) uint64 {
	t.Helper()
	fams, err := p.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range fams {
		if mf.GetName() == "e2a_ingress_publish_seconds" {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

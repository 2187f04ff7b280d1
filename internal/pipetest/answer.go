package pipetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// Answer is the E2A JSON answer of a finished request (GET
// /v1/requests/{id}?wait=true).
type Answer struct {
	State  string          `json:"state"`
	Frames []*e2a.Response `json:"frames"`
}

// Final is the last frame (nil when there is none).
func (a Answer) Final() *e2a.Response {
	if len(a.Frames) == 0 {
		return nil
	}
	return a.Frames[len(a.Frames)-1]
}

// Text is the string deltas of delta kind kind, joined.
func (a Answer) Text(kind string) string {
	var b strings.Builder
	for _, f := range a.Frames {
		if c, err := f.Chunk(); err == nil && c.DeltaKind == kind {
			s, _ := c.Delta.(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// ErrorCode is the code and retryable of the final e2a.error ("" when the
// final frame is none).
func (a Answer) ErrorCode() (string, bool) {
	f := a.Final()
	if f == nil || f.ResponseKind != e2a.KindError {
		return "", false
	}
	b, _ := f.Error()
	return b.Code, b.Retryable
}

// Ask posts the E2A request body to pool's own endpoint and waits for its
// answer (a status other than 200 fails the test).
func (p *Pipeline) Ask(t testing.TB, pool, body string) Answer {
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
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d: %s", resp.StatusCode, b)
	}
	return a
}

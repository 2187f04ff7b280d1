package a2abridge_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestTakeoverOfConcurrentSessionRequests: two E2A requests of one session
// (no task_id: one thread of the conversation record) run at once on
// worker A, each in an upstream task of its own. A dies mid-stream; worker
// B takes both over. Each resumes its own upstream task (SubscribeToTask),
// found by its request id in the thread (bridge.Thread.TaskOf), and
// completes with every chunk once: not only the thread's latest request.
func TestTakeoverOfConcurrentSessionRequests(t *testing.T) {
	t.Parallel()
	const chunks = 200 // 6 s at 30 ms: both run well past the takeover
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: chunks})
	p := pipetest.Start(t)
	tk := &takeover{p: p}
	stopA := tk.worker(t, srv.BaseURL())

	post := func(id, text string) {
		body := `{"request_id":"` + id + `","session_id":"takeover-session","params":{"text":"` + text + `"}}`
		resp, b := testkit.Do(t, http.MethodPost, p.URL+"/pools/agent/v1/requests", body, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", id, resp.StatusCode, b)
		}
	}
	framesOf := func(id string) int {
		subj, _ := subjects.Response(id)
		msgs, err := streams.DirectGetAll(testCtx(t), p.NC, streams.ResponsesStream, subj, 1, 256)
		if err != nil && !errors.Is(err, streams.ErrNoMessages) {
			t.Fatal(err)
		}
		return len(msgs)
	}
	post("session-one", "slow: one")
	testkit.Eventually(t, 20*time.Second, "frames of session-one", func() bool { return framesOf("session-one") >= 2 })
	post("session-two", "slow: two")
	testkit.Eventually(t, 20*time.Second, "frames of session-two", func() bool { return framesOf("session-two") >= 2 })
	stopA()
	tk.worker(t, srv.BaseURL()) // worker B

	for _, id := range []string{"session-one", "session-two"} {
		resp, b := testkit.Do(t, http.MethodGet, p.URL+"/v1/requests/"+id+"?wait=true", "")
		var a pipetest.Answer
		if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", id, resp.StatusCode, b)
		}
		code, retryable := a.ErrorCode()
		if a.Final() == nil || a.Final().ResponseKind != e2a.KindComplete || a.Text(e2a.DeltaText) != slowText(chunks) {
			t.Errorf("%s after the takeover: final %s (code %q, retryable %v), %d text bytes of %d",
				id, a.Final().ResponseKind, code, retryable, len(a.Text(e2a.DeltaText)), len(slowText(chunks)))
		}
	}
	if n := len(srv.CallsOf("SubscribeToTask")); n < 2 {
		t.Errorf("the agent was subscribed to %d times, want one per request taken over (2)", n)
	}
}

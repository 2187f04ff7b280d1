package ingress_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestStreamRefusedPublishesNothing: a streamed answer refused for want
// of a stream slot (429) publishes nothing, on every front door that
// streams: the submission takes the slot before the publish (issue 39's
// one submit). E2A streams and waits and A2A v1.0 streams took it after
// the publish before, so a refused client retrying without a request id
// ran its request twice.
func TestStreamRefusedPublishesNothing(t *testing.T) {
	lim := ingress.NewStreamLimiter(1)
	p := startPipelineWith(t, ingress.WithStreamLimiter(lim))
	started := make(chan struct{}, 1)
	runSlowAgent(t, p, started, agent.WithDrainTimeout(0))
	// One stream holds the principal's only slot.
	defer holdSlowStream(t, p, started)()
	before := streamMsgs(t, p.js, streams.RequestsStream)

	v1 := `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	v03 := `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m-2","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`
	for _, tc := range []struct {
		name, path, accept, body, want string
	}{
		{"e2a-sse", "/v1/requests?agent=slow", "text/event-stream", `{"params":{"q":"x"}}`, `"too_many_streams"`},
		{"e2a-ndjson", "/v1/requests?agent=slow", "application/x-ndjson", `{"params":{"q":"x"}}`, `"too_many_streams"`},
		{"e2a-wait", "/v1/requests?agent=slow&wait=true", "", `{"params":{"q":"x"}}`, `"too_many_streams"`},
		{"a2a-v1", ingress.A2AV1Path + "?agent=slow", "", v1, "too many concurrent streams"},
		{"a2a-v03", "/a2a?agent=slow", "text/event-stream", v03, "too many concurrent streams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := []string{"Content-Type", "application/json"}
			if tc.accept != "" {
				hdr = append(hdr, "Accept", tc.accept)
			}
			resp, b := do(t, http.MethodPost, p.url+tc.path, tc.body, hdr...)
			if !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if after := streamMsgs(t, p.js, streams.RequestsStream); after != before {
				t.Fatalf("E2A_REQUESTS went from %d to %d messages: the refused stream was published", before, after)
			}
			if lim.Total() != 1 {
				t.Fatalf("%d stream slots held, want the first stream's 1", lim.Total())
			}
		})
	}
}

// holdSlowStream opens an E2A stream to the slow agent (runSlowAgent,
// which reports each request it gets on started) and returns once the agent
// has its request: the stream holds one of the principal's stream slots
// until the returned stop ends it.
func holdSlowStream(t *testing.T, p *pipeline, started <-chan struct{}) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/v1/requests?agent=slow", strings.NewReader(`{"params":{"q":"hold"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	held, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	testkit.Receive(t, started, 10*time.Second, "the agent never got the held stream's request")
	return func() { cancel(); held.Body.Close() }
}

// TestSessionCancelAwaitsTheTurn: a session/cancel that finds in the
// session's record a turn whose publish has not landed (a turn is recorded
// before it is published) waits for the request to be stored before it
// cancels it, and cancels nothing when it never is (its publish failed):
// a cancel stored before its request can be missed by a worker that
// starts between the two (agent.Cancel). ACP stdio's
// TestStdioCancelFollowsItsRequest failed once on the old order.
func TestSessionCancelAwaitsTheTurn(t *testing.T) {
	ctx := context.Background()
	p := startPipelineWith(t, ingress.WithPublishTimeout(300*time.Millisecond))
	sid := p.acpSession(t)
	ts, err := ingress.NewTaskStore(ctx, p.js)
	if err != nil {
		t.Fatal(err)
	}
	const never = "turn-never-published"
	if _, err := ts.Append(ctx, ingress.KindSession, ingress.TaskRecord{ID: sid, Protocol: "acp", Pool: "demo"}, never, tenant.Principal{Open: true}); err != nil {
		t.Fatal(err)
	}
	if m := p.acpCall(t, `{"jsonrpc":"2.0","id":1,"method":"session/cancel","params":{"sessionId":"`+sid+`"}}`); m.Error != nil {
		t.Fatalf("session/cancel: %+v", m.Error)
	}
	subj, err := subjects.Control(never)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := streams.LastBySubject(ctx, p.nc, streams.ControlStream, subj); !errors.Is(err, streams.ErrNoMessages) {
		t.Fatalf("a cancel was stored for a request never published: %s %v", m.Data, err)
	}
}

package a2abridge_test

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/streams"
)

// statusQuoter is an agent whose working status messages quote the
// Authorization header it got, as status(auth) makes them, then answers
// "done"; when failed, its last status message is that of its failed
// status instead, after the answer.
type statusQuoter struct {
	status func(auth string) []*a2a.Message
	failed bool
}

func (s statusQuoter) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	auth := ""
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		for k, v := range cc.ServiceParams().List() {
			if strings.EqualFold(k, "Authorization") && len(v) > 0 {
				auth = v[0]
			}
		}
	}
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		msgs, end := s.status(auth), a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)
		for _, m := range msgs {
			m.TaskID, m.ContextID = ec.TaskID, ec.ContextID
		}
		if s.failed {
			end = a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, msgs[len(msgs)-1])
			msgs = msgs[:len(msgs)-1]
		}
		for _, m := range msgs {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, m), nil) {
				return
			}
		}
		ev := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart("done"))
		ev.Append, ev.LastChunk = false, true
		_ = yield(ev, nil) && yield(end, nil)
	}
}

func (statusQuoter) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestStatusMessageDataPartScrubbed: a working status message is the
// agent's own words about its work, which may quote the request's headers
// (events.go turn.scrubbed): in a data part too (a debugging agent's
// {"request_headers": …}), written as an artifact_update the Handler does
// not scan. Found by review: only text parts were scrubbed, and the key
// reached E2A_RESPONSES and every client. Not covered: a key the agent
// splits across two status updates (as across two text deltas,
// docs/design.md "Bridges").
func TestStatusMessageDataPartScrubbed(t *testing.T) {
	const key = "sk-a2a-review-s31b-7c1d93"
	cases := map[string]func(auth string) []*a2a.Message{
		"data part": func(auth string) []*a2a.Message {
			return []*a2a.Message{a2a.NewMessage(a2a.MessageRoleAgent,
				a2a.NewTextPart("calling the backend; "),
				a2a.NewDataPart(map[string]any{"request_headers": map[string]any{"Authorization": auth}}))}
		},
		// Found by review of 94a7cdd, which scrubbed the data only: a part
		// is written (writeNative) with its metadata.
		"data part metadata": func(auth string) []*a2a.Message {
			p := a2a.NewDataPart(map[string]any{"step": "calling the backend"})
			p.Metadata = map[string]any{"request_headers": map[string]any{"Authorization": auth}}
			return []*a2a.Message{a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("calling the backend; "), p)}
		},
	}
	for name, status := range cases {
		t.Run(name, func(t *testing.T) {
			base := serveA2A(t, a2asrv.NewHandler(statusQuoter{status: status}))
			p := pipetest.Start(t)
			credPool(t, p, "quote", base, bridge.Credentials{APIKey: key}, &testkit.Buffer{})
			a := p.Ask(t, "quote", `{"params":{"text":"hi"}}`)
			if f := a.Final(); f == nil || !strings.Contains(a.Text("text"), "done") {
				t.Fatalf("the answer did not end with the agent's text: final %+v", f)
			}
			if n := natstest.StoredWith(t, p.JS, key, streams.ResponsesStream); n > 0 {
				t.Errorf("the bridge's API key is stored in %d messages of E2A_RESPONSES (a working status message quoting the "+
					"Authorization header, %s); want it taken out of the status message as a whole, as TestWorkingStatusScrubbed's text part is", n, name)
			}
			if got := a.Text("text"); strings.Contains(got, key) {
				t.Errorf("the answer's text as a client joins its deltas holds the bridge's API key: %q; want the status words scrubbed as a whole", got)
			}
			for i, f := range a.Frames {
				if strings.Contains(string(f.Body), key) {
					t.Errorf("frame %d (%s) holds the bridge's API key: %s", i, f.ResponseKind, f.Body)
				}
			}
		})
	}
}

// TestFailedStatusMessageScrubbed: the message of a bridged agent's
// failed status, which the final e2a.error frame carries as the agent
// sent it (status_message, for the A2A clients), is the agent's own words
// too: a data part's metadata quoting the Authorization header is
// scrubbed, the message kept.
func TestFailedStatusMessageScrubbed(t *testing.T) {
	const key = "sk-a2a-review-s87-failed-4e2b"
	base := serveA2A(t, a2asrv.NewHandler(statusQuoter{failed: true, status: func(auth string) []*a2a.Message {
		p := a2a.NewDataPart(map[string]any{"step": "calling the backend"})
		p.Metadata = map[string]any{"request_headers": map[string]any{"Authorization": auth}}
		return []*a2a.Message{a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("the backend refused"), p)}
	}}))
	p := pipetest.Start(t)
	credPool(t, p, "quote", base, bridge.Credentials{APIKey: key}, &testkit.Buffer{})
	a := p.Ask(t, "quote", `{"params":{"text":"hi"}}`)
	f := a.Final()
	if f == nil || f.ResponseKind != e2a.KindError {
		t.Fatalf("final %+v, want the agent's failure", f)
	}
	msg, _ := f.Metadata[a2amap.MetaStatusMessage].(map[string]any)
	if parts, _ := msg["parts"].([]any); len(parts) != 2 {
		t.Fatalf("the final frame's status_message %v, want the agent's message of two parts", f.Metadata[a2amap.MetaStatusMessage])
	}
	if n := natstest.StoredWith(t, p.JS, key, streams.ResponsesStream); n > 0 {
		t.Errorf("the bridge's API key is stored in %d messages of E2A_RESPONSES (the failed status's message quoting the "+
			"Authorization header); want it scrubbed", n)
	}
}

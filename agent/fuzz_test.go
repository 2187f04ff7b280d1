package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// FuzzPublishedRequest: whatever bytes (and E2A headers) an integrator
// publishes on a pool's request subject, the pool answers the request
// with frames that pass e2a.CheckFrames and end with a final one: an
// envelope that does not decode with invalid_request, a decoded one
// with its handler's answer or a refusal (a cancel turn, a deadline
// past); the worker goes on serving.
func FuzzPublishedRequest(f *testing.F) {
	s := startServer(f)
	nc := s.connect(f)
	const pool = "fuzz"
	echo := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, env.ParamString("text")); err != nil {
			return err
		}
		return w.Complete(map[string]any{"method": env.Method})
	})
	startWorker(f, nc, pool, echo)
	waitConsumer(f, s.js, pool)
	for _, seed := range []struct{ data, header string }{
		{`{"protocol_version":"1.0","request_id":"x","method":"chat.send","params":{"text":"hi"}}`, ""},
		{`{"params":{"text":"hi"},"deadline":"2001-01-01T00:00:00Z"}`, ""},
		{`{"params":{"text":"hi"},"method":"e2a.cancel_turn","task_id":"t"}`, ""},
		{`{"params":{"text":"hi"},"timeout_ms":1}`, "E2A-Deadline"},
		{`{"params":"not an object"}`, ""},
		{`not json`, ""},
		{``, ""},
		{`{"request_id":"other","params":{"text":"x"}}`, ""},
	} {
		f.Add([]byte(seed.data), seed.header)
	}
	n := 0
	f.Fuzz(func(t *testing.T, data []byte, header string) {
		n++
		id := fmt.Sprintf("fz-%d-%d", time.Now().UnixNano(), n)
		subj, err := subjects.Request(pool, id)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(subj)
		m.Data = data
		if header != "" {
			m.Header.Set(header, string(data))
		}
		if _, err := s.js.PublishMsg(tctx(t), m, jetstream.WithMsgID(id)); err != nil {
			return // the server refused the headers: nothing was stored
		}
		fr := waitFinal(t, nc, id, 20*time.Second)
		last := fr[len(fr)-1]
		if _, perr := e2a.FromJSON(data); perr != nil {
			body, err := last.Error()
			if last.ResponseKind != e2a.KindError || err != nil || body.Code != e2a.ErrCodeInvalidRequest {
				t.Fatalf("%q does not decode (%v), answered %s %s", data, perr, last.ResponseKind, last.Body)
			}
		}
	})
}

package ingress_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// sizeProbe posts a request whose envelope grows with n, and reports
// whether it was accepted; a refusal must be the protocol's 413.
type sizeProbe struct {
	name string
	post func(t *testing.T, n int) (accepted bool)
}

// With a server whose max_payload (64 KiB) is far below the body limit
// (4 MiB), every protocol answers a request whose envelope cannot be
// published with its own 413 (never 503 retryable) and publishes nothing;
// the largest request that fits is accepted, and its audit copy is made.
func TestSizesAgree(t *testing.T) {
	const maxPayload = 64 << 10
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(maxPayload))
	if nc.MaxPayload() != maxPayload {
		t.Fatalf("server max_payload %d", nc.MaxPayload())
	}
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc, ingress.WithMaxBodyBytes(4<<20), ingress.WithWorkflow(workflow.New(workflow.Options{})))
	// An agent that completes every request at once, on the pools the
	// protocols route to.
	done := func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete(map[string]any{"ok": true})
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{}, 2)
	for _, pool := range []string{"demo", workflow.Pool} {
		go func() {
			defer func() { stopped <- struct{}{} }()
			_ = agent.Run(ctx, nc, pool, agent.HandlerFunc(done))
		}()
	}
	t.Cleanup(func() { cancel(); <-stopped; <-stopped })

	rpc413 := func(t *testing.T, name string, resp *http.Response, b []byte) {
		t.Helper()
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *ingress.Error  `json:"error"`
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &r) != nil || r.Error == nil ||
			r.Error.Code != jsonrpc.CodeInvalidRequest || string(r.ID) == "null" {
			t.Fatalf("%s: want 413 with a JSON-RPC error to the call's id, got %d %s", name, resp.StatusCode, b)
		}
		if d, _ := r.Error.Data.(map[string]any); d["retryable"] != false {
			t.Fatalf("%s: error data %v", name, r.Error.Data)
		}
	}
	rpcOK := func(t *testing.T, name string, resp *http.Response, b []byte) bool {
		t.Helper()
		if resp.StatusCode == http.StatusRequestEntityTooLarge {
			rpc413(t, name, resp, b)
			return false
		}
		if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
		}
		return true
	}
	// A session of its own for each probe: a later turn's request carries
	// the turns before it (E2A-After-Request, E2A-Earlier-Requests), a
	// header that grows with the session as the bisection goes on, and the
	// size would not depend on the text alone.
	newSession := func() string {
		_, b := do(t, "POST", url+"/acp", `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
		var r struct{ Result struct{ SessionID string } }
		if json.Unmarshal(b, &r) != nil || r.Result.SessionID == "" {
			t.Fatalf("session/new: %s", b)
		}
		return r.Result.SessionID
	}
	seq := 0
	probes := []sizeProbe{
		{"e2a", func(t *testing.T, n int) bool {
			resp, b := do(t, "POST", url+"/v1/requests", `{"params":{"text":"`+strings.Repeat("x", n)+`"}}`)
			if resp.StatusCode == http.StatusAccepted {
				return true
			}
			var eb ingress.ErrorBody
			if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &eb) != nil ||
				eb.Error.Code != "body_too_large" || eb.Error.Retryable || resp.Header.Get("Retry-After") != "" {
				t.Fatalf("e2a: want 413 body_too_large, got %d %s", resp.StatusCode, b)
			}
			return false
		}},
		{"a2a message/send", func(t *testing.T, n int) bool {
			resp, b := do(t, "POST", url+"/a2a", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"`+strings.Repeat("x", n)+`"}]}}}`)
			return rpcOK(t, "a2a", resp, b)
		}},
		{"agentvault tasks/send", func(t *testing.T, n int) bool {
			resp, b := do(t, "POST", url+"/a2a", `{"jsonrpc":"2.0","id":"av","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"`+strings.Repeat("x", n)+`"}]}}}`)
			return rpcOK(t, "agentvault", resp, b)
		}},
		{"acp session/prompt", func(t *testing.T, n int) bool {
			resp, b := do(t, "POST", url+"/acp", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+newSession()+`","prompt":[{"type":"text","text":"`+strings.Repeat("x", n)+`"}]}}`)
			if resp.StatusCode == http.StatusOK {
				if !bytes.Contains(b, []byte(`"stopReason"`)) {
					t.Fatalf("acp: %s", b)
				}
				return true
			}
			rpc413(t, "acp", resp, b)
			return false
		}},
		{"a2e", func(t *testing.T, n int) bool {
			resp, b := do(t, "POST", url+"/a2e", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-42","text":"`+strings.Repeat("x", n)+`"}`)
			var last egress_A2E
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
					t.Fatalf("a2e line %s", sc.Bytes())
				}
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("a2e: %d %s", resp.StatusCode, b)
			}
			if last.Type == "error" {
				if last.Code != "body_too_large" || last.Retryable == nil || *last.Retryable {
					t.Fatalf("a2e: want a body_too_large error, not retryable, got %s", b)
				}
				return false
			}
			if last.Type != "tool/call/resp" {
				t.Fatalf("a2e: %s", b)
			}
			return true
		}},
		{"workflow execute", func(t *testing.T, n int) bool {
			seq++
			// A member the executor ignores pads the workflow, which the
			// envelope carries.
			wf := `{"type":"operationUpdate","operationId":"wait","note":"` + strings.Repeat("x", n) + `","operation":{"Wait":{"duration":1}}}` + "\n" +
				fmt.Sprintf(`{"type":"beginExecution","executionId":"exec-%06d","operationOrder":["wait"]}`, seq)
			body, _ := json.Marshal(map[string]string{"workflow": wf})
			resp, b := do(t, "POST", url+"/api/v1/workflows/execute", string(body))
			switch resp.StatusCode {
			case http.StatusOK:
				return true
			case http.StatusRequestEntityTooLarge:
				var e struct{ Error workflow.Error }
				if json.Unmarshal(b, &e) != nil || e.Error.Type != workflow.ValidationError || resp.Header.Get("Retry-After") != "" {
					t.Fatalf("workflow: 413 body %s", b)
				}
				return false
			}
			t.Fatalf("workflow n=%d: %d %s", n, resp.StatusCode, b)
			return false
		}},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			probe := func(n int) bool {
				before := streamMsgs(t, js, streams.RequestsStream)
				ok := p.post(t, n)
				after := streamMsgs(t, js, streams.RequestsStream)
				if ok && after != before+1 || !ok && after != before {
					t.Fatalf("n=%d accepted=%v: E2A_REQUESTS went from %d to %d messages", n, ok, before, after)
				}
				return ok
			}
			// Bisect the largest accepted size between a small body and a
			// body over max_payload (but far under the body limit).
			lo, hi := 100, maxPayload+1000
			if a, b := probe(lo), probe(hi); !a || b {
				t.Fatalf("bounds: %d must fit, %d must not", lo, hi)
			}
			for hi-lo > 1 {
				if mid := (lo + hi) / 2; probe(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			// The largest accepted envelope is within a few bytes of the
			// limit: only what the server cannot take is refused.
			last, err := js.Stream(context.Background(), streams.RequestsStream)
			if err != nil {
				t.Fatal(err)
			}
			info, _ := last.Info(context.Background())
			m, err := last.GetMsg(context.Background(), info.State.LastSeq)
			if err != nil {
				t.Fatal(err)
			}
			// The headers as published: a get adds the stream's own.
			for _, h := range []string{jetstream.StreamHeader, jetstream.SequenceHeader, jetstream.SubjectHeader, jetstream.TimeStampHeaer} {
				m.Header.Del(h)
			}
			size := streams.MessageSize(&nats.Msg{Header: m.Header, Data: m.Data})
			if size > maxPayload || maxPayload-size > 16 {
				t.Fatalf("largest accepted envelope %d bytes, max_payload %d", size, maxPayload)
			}
			t.Logf("largest accepted: %d bytes of text, envelope %d bytes (max_payload %d); %d refused with 413", lo, size, maxPayload, hi)
		})
	}
	// Every accepted request was copied into E2A_AUDIT, those of exactly
	// max_payload too (the copy's source header does not count against it).
	want := streamMsgs(t, js, streams.RequestsStream)
	audit, err := js.OrderedConsumer(context.Background(), streams.AuditStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{strings.TrimSuffix(subjects.AuditRequest(0), "0") + "*"}})
	if err != nil {
		t.Fatal(err)
	}
	got, start := uint64(0), time.Now()
	defer func() { t.Logf("%d audit copies read in %v", got, time.Since(start)) }()
	for got < want {
		if _, err := audit.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil {
			t.Fatalf("audit copies: %d of %d: %v", got, want, err)
		}
		got++
	}
}

// egress_A2E is the part of an A2E answer line the test reads.
type egress_A2E struct {
	Type      string `json:"type"`
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable"`
}

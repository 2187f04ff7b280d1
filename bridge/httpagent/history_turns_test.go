package httpagent_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestHistoryKeepsTheAgentsReplyText: an HTTP agent answers its first
// turn with its own Message as a final a2a.stream_event of branch message
// (the frame agent.Reply writes, e2a.ReplyBody; e2a.Response.Reply reads
// it as the turn's Message, and every A2A client is shown it as the
// agent's Message). The next turn of the same session carries that turn in
// its history member, the agent's message with the reply's text (docs/agents.md:
// "text: ... the text of a final a2a.message"), so a stateless agent knows
// what it said.
func TestHistoryKeepsTheAgentsReplyText(t *testing.T) {
	srv := newRecorder(t, func(n int) string {
		if n == 1 {
			return `{"response_kind":"a2a.stream_event","status":"succeeded","is_final":true,"body":` +
				string(e2a.MarshalBody(e2a.ReplyBody("It is sunny in Paris"))) + "}\n"
		}
		return `{"response_kind":"e2a.complete","body":{"result":"ok"}}` + "\n"
	})
	r := newRig(t, srv.URL, rigConfig{})
	first := r.ask(t, `{"request_id":"hist-h1","session_id":"hist-session","params":{"text":"the weather?"}}`)
	if text, ok := first[len(first)-1].Reply(); !ok || text != "It is sunny in Paris" {
		t.Fatalf("first turn's final frame: %+v", first[len(first)-1])
	}
	r.ask(t, `{"request_id":"hist-h2","session_id":"hist-session","params":{"text":"and tomorrow?"}}`)
	bodies := srv.Bodies()
	if len(bodies) != 2 {
		t.Fatalf("%d POSTs, want 2", len(bodies))
	}
	var body struct {
		History []httpagent.HistoryMessage `json:"history"`
	}
	if err := json.Unmarshal(bodies[1], &body); err != nil {
		t.Fatal(err)
	}
	var agentMsg *httpagent.HistoryMessage
	for i := range body.History {
		if body.History[i].Role == "agent" && body.History[i].RequestID == "hist-h1" {
			agentMsg = &body.History[i]
		}
	}
	if agentMsg == nil || agentMsg.Text != "It is sunny in Paris" {
		t.Fatalf("second turn's history %+v: want the first turn's agent message with its reply's text \"It is sunny in Paris\" (the turn ended with the agent's Message)", body.History)
	}
}

// TestHistoryRetriedTurnNotDuplicated: two turns of one E2A context
// run at once (A, then B while A's POST is in flight). The HTTP agent
// answers A's first POST 503 (retryable: the bridge POSTs A again) after
// B was recorded. The next turn C's history holds each earlier turn once,
// A's user message once: a retried POST is the same turn, not a new one.
func TestHistoryRetriedTurnNotDuplicated(t *testing.T) {
	aArrived, bArrived := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	attemptsA := 0
	var bodyC []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := mustRead(r)
		var env struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(b, &env)
		switch env.RequestID {
		case "hist-dup-a":
			mu.Lock()
			attemptsA++
			n := attemptsA
			mu.Unlock()
			if n == 1 {
				close(aArrived)
				select {
				case <-bArrived:
				case <-time.After(20 * time.Second):
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "hist-dup-b":
			close(bArrived)
		case "hist-dup-c":
			mu.Lock()
			bodyC = b
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(`{"response_kind":"e2a.complete","body":{"result":"ok"}}` + "\n"))
	}))
	defer srv.Close()
	r := newRig(t, srv.URL, rigConfig{})
	aDone := make(chan error, 1)
	go func() {
		resp, err := r.post(`{"request_id":"hist-dup-a","context_id":"hist-dup-ctx","params":{"text":"turn A"}}`)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		aDone <- err
	}()
	select {
	case <-aArrived:
	case <-time.After(20 * time.Second):
		t.Fatal("turn A never reached the HTTP agent")
	}
	r.ask(t, `{"request_id":"hist-dup-b","context_id":"hist-dup-ctx","params":{"text":"turn B"}}`)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := attemptsA
	mu.Unlock()
	if n != 2 {
		t.Fatalf("turn A POSTed %d times, want 2 (a 503, then the retry)", n)
	}
	r.ask(t, `{"request_id":"hist-dup-c","context_id":"hist-dup-ctx","params":{"text":"turn C"}}`)
	mu.Lock()
	defer mu.Unlock()
	var body struct {
		History []httpagent.HistoryMessage `json:"history"`
	}
	if err := json.Unmarshal(bodyC, &body); err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	for _, m := range body.History {
		if m.Role == "user" {
			users[m.RequestID]++
		}
	}
	if users["hist-dup-a"] != 1 || users["hist-dup-b"] != 1 {
		t.Fatalf("turn C's history %+v: user messages per turn %v; want turn A and turn B once each (A's retried POST is the same turn)", body.History, users)
	}
}

// TestHistoryBoundedToNewestTurns: 20 turns of one session, each user message
// 6 KiB, then one of 200 KiB: every POST's history member stays within
// 64 KiB of JSON and 16 turns, holds the newest messages (the turn just
// before first), and the POST after the huge turn is still sent.
func TestHistoryBoundedToNewestTurns(t *testing.T) {
	srv := newRecorder(t, func(int) string { return `{"response_kind":"e2a.complete","body":{"result":"ok"}}` + "\n" })
	r := newRig(t, srv.URL, rigConfig{})
	pad := strings.Repeat("x", 6<<10)
	for i := range 20 {
		r.ask(t, `{"request_id":"hist-b`+strconv.Itoa(i)+`","session_id":"hist-bounds","params":{"text":"`+strconv.Itoa(i)+pad+`"}}`)
	}
	r.ask(t, `{"request_id":"hist-huge","session_id":"hist-bounds","params":{"text":"`+strings.Repeat("y", 200<<10)+`"}}`)
	r.ask(t, `{"request_id":"hist-last","session_id":"hist-bounds","params":{"text":"last"}}`)
	bodies := srv.Bodies()
	if len(bodies) != 22 {
		t.Fatalf("%d POSTs, want 22", len(bodies))
	}
	for i, b := range bodies {
		var body struct {
			History json.RawMessage `json:"history"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		if len(body.History) > 64<<10 {
			t.Fatalf("POST %d: history member %d bytes, want at most 64 KiB", i, len(body.History))
		}
		var msgs []httpagent.HistoryMessage
		_ = json.Unmarshal(body.History, &msgs)
		turns := map[string]bool{}
		for _, m := range msgs {
			turns[m.RequestID] = true
		}
		if len(turns) > 16 {
			t.Fatalf("POST %d: history of %d turns, want at most 16", i, len(turns))
		}
		if i > 0 && i < 20 {
			want := "hist-b" + strconv.Itoa(i-1)
			if len(msgs) == 0 || msgs[len(msgs)-1].RequestID != want {
				t.Fatalf("POST %d: history does not end with the turn just before (%s): %d messages", i, want, len(msgs))
			}
		}
	}
}

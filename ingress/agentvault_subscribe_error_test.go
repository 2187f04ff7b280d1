package ingress_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestAgentVaultSubscribeErrorIsErrorEvent: a tasks/sendSubscribe refused
// before its stream starts (an unknown task, another principal's, bad
// params) reaches an AgentVault client as the profile's `event: error`
// with data {"error":"<code>","message":"<desc>"}. It was an unnamed
// event (type "message", which the AgentVault client maps to
// TaskMessageEvent) holding a JSON-RPC error, which the client failed to
// validate, skipped, and ended the subscription as if it had succeeded.
func TestAgentVaultSubscribeErrorIsErrorEvent(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	for name, body := range map[string]string{
		"unknown task": `{"jsonrpc":"2.0","id":"req-sub-1","method":"tasks/sendSubscribe","params":{"id":"no-such-task"}}`,
		"no params":    `{"jsonrpc":"2.0","id":"req-sub-2","method":"tasks/sendSubscribe","params":{}}`,
	} {
		resp, b := do(t, "POST", url+"/a2a", body, "Accept", "text/event-stream")
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: %d %q %s", name, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		ev := testkit.Events(testkit.MustReadSSE(t, bytes.NewReader(b)))
		if len(ev) != 1 {
			t.Fatalf("%s: %d events: %s", name, len(ev), b)
		}
		var data struct {
			Error   any    `json:"error"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal([]byte(ev[0].Data), &data)
		_, codeIsString := data.Error.(string)
		if ev[0].Event != "error" || !codeIsString || data.Message == "" {
			t.Errorf("%s: event %q data %s; the AgentVault profile's stream error is event: error, data {\"error\":\"<code>\",\"message\":\"<desc>\"}",
				name, ev[0].Event, ev[0].Data)
		}
	}
}

// TestSameRequestIDDifferentContent: the same
// request_id posted again with another body is the first request
// ("duplicate": true), nothing new is stored, and the read API shows the
// first envelope, as docs/protocols.md says.
func TestSameRequestIDDifferentContent(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc)
	resp, b := do(t, "POST", url+"/v1/requests?agent=demo", `{"request_id":"rv-dup-1","params":{"text":"first"}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	before := streamMsgs(t, js, streams.RequestsStream)
	resp, b = do(t, "POST", url+"/v1/requests?agent=demo", `{"request_id":"rv-dup-1","params":{"text":"second"}}`)
	if resp.StatusCode != http.StatusAccepted || !bytes.Contains(b, []byte(`"duplicate":true`)) {
		t.Fatalf("second: %d %s", resp.StatusCode, b)
	}
	if after := streamMsgs(t, js, streams.RequestsStream); after != before {
		t.Errorf("the second post stored %d more messages", after-before)
	}
	_, b = do(t, "GET", url+"/v1/requests/rv-dup-1", "")
	if !bytes.Contains(b, []byte(`"text":"first"`)) || bytes.Contains(b, []byte(`"text":"second"`)) {
		t.Errorf("the read API shows %s", b)
	}
}

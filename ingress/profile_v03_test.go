package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
	legacycard "github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// TestPoolProfileV03: the A2A v0.3 endpoint applies the pool's profile
// too: the pool's card says streaming false and requires the extension; a
// message/send without X-A2A-Extensions is -32008, with it answered (the
// a2a-go v0.3 client given the card sends message/stream as
// message/send); message/stream and tasks/resubscribe are -32004; nothing
// refused is published.
func TestPoolProfileV03(t *testing.T) {
	p, _ := startBasicPipeline(t)
	ctx := tckCtx(t)
	card, err := legacycard.NewResolver(nil).Resolve(ctx, p.url+"/pools/"+basicPool)
	if err != nil {
		t.Fatal(err)
	}
	if card.Capabilities.Streaming || len(card.Capabilities.Extensions) == 0 {
		t.Fatalf("v0.3 pool card: %+v", card.Capabilities)
	}
	hc := &http.Client{Transport: headerTransport{http.Header{"X-A2a-Extensions": {basicExt}}}}
	c, err := legacyclient.NewFromCard(ctx, card, legacyclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	msg := &legacy.MessageSendParams{Message: legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: "v0.3"})}
	var last legacy.Event
	for ev, err := range c.SendStreamingMessage(ctx, msg) {
		if err != nil {
			t.Fatalf("SendStreamingMessage from the card: %v", err)
		}
		last = ev
	}
	task, ok := last.(*legacy.Task)
	if !ok || task.Status.State != legacy.TaskStateCompleted {
		t.Fatalf("SendStreamingMessage from the card: %+v", last)
	}

	before := requestsStored(t, p)
	call := func(method, params string, hdr ...string) (int, string) {
		_, b := do(t, "POST", p.url+"/pools/"+basicPool+"/a2a", `{"jsonrpc":"2.0","id":"v1","method":"`+method+`","params":`+params+`}`,
			append([]string{"Content-Type", "application/json"}, hdr...)...)
		body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "data:"))
		var r struct{ Error *struct{ Code int } }
		if json.Unmarshal([]byte(body), &r) != nil || r.Error == nil {
			return 0, string(b)
		}
		return r.Error.Code, string(b)
	}
	send := `{"message":{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"text","text":"x"}]}}`
	if code, b := call("message/send", send); code != -32008 {
		t.Errorf("message/send without the extension: %s", b)
	}
	if code, b := call("message/stream", send, "X-A2A-Extensions", basicExt, "Accept", "text/event-stream"); code != -32004 {
		t.Errorf("message/stream: %s", b)
	}
	if code, b := call("tasks/resubscribe", `{"id":"`+string(task.ID)+`"}`, "X-A2A-Extensions", basicExt, "Accept", "text/event-stream"); code != -32004 {
		t.Errorf("tasks/resubscribe: %s", b)
	}
	if n := requestsStored(t, p); n != before {
		t.Fatalf("a refused call was published (%d requests, %d before)", n, before)
	}
}

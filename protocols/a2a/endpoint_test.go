package a2a

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestTables: which methods stream, their labels, and the table a name
// belongs to (tasks/get is A2A's first).
func TestTables(t *testing.T) {
	for m, want := range map[string]bool{"message/stream": true, "tasks/resubscribe": true, "tasks/sendSubscribe": true,
		"SendStreamingMessage": true, "message/send": false, "tasks/get": false, "no/such": false} {
		if Streaming(m) != want {
			t.Errorf("streaming %s = %v", m, !want)
		}
	}
	if Label("no/such") != "other" || Label("tasks/send") != "tasks/send" || Label("GetTask") != "GetTask" {
		t.Error("labels")
	}
	if _, tb, _ := method("tasks/get"); tb != 0 {
		t.Errorf("tasks/get in table %d", tb)
	}
	if !isV1("SendMessage") || isV1("message/send") {
		t.Error("v1 names")
	}
}

type v1Host struct {
	host.TaskHost
	h http.Handler
}

func (v v1Host) BindingRPC() http.Handler { return v.h }

// TestPeek: a single v1.0 call is diverted; a batch, a v0.3 call or a
// body that only mentions a v1.0 name is not, and refusals echo a valid id.
func TestPeek(t *testing.T) {
	v1 := http.NotFoundHandler()
	d := &frontDoor{h: v1Host{h: v1}}
	for body, diverted := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`:                                true,
		`[{"jsonrpc":"2.0","id":1,"method":"SendMessage"}]`:                                          false,
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"text":"\"SendMessage\""}}`:       false,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`:                          false,
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}} trailing`:                   false,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"message/send","params":{"message":"SendMessage"}}`:  false,
		`{"jsonrpc":"2.0","id":"a","method":"DeleteTaskPushNotificationConfig","params":{"id":"t"}}`: true,
	} {
		h, refuse := d.peek([]byte(body))
		if (h != nil) != diverted || refuse == nil {
			t.Errorf("%s: diverted %v", body, h != nil)
		}
	}
	for body, id := range map[string]string{`{"id":"x-1"}`: `"x-1"`, `{"id":7}`: `7`, `{"id":{"a":1}}`: `null`, `not json`: `null`} {
		_, refuse := d.peek([]byte(body))
		w := httptest.NewRecorder()
		refuse(w, host.Refusal{Status: http.StatusTooManyRequests, RPCCode: -32000, Message: "slow down"})
		if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"id":`+id) {
			t.Errorf("%s: %d %s", body, w.Code, w.Body)
		}
	}
}

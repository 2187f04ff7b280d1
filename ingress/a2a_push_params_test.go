package ingress_test

import (
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestV03PushParamsRefusedInClientWords: a v0.3 push-config call whose
// params are missing, not an object, or hold a member of another type is
// -32602 in the words the other calls use ("params are required",
// "params must be an object", "params: <member>: cannot be a JSON
// <type>"). It was encoding/json's error: "unexpected end of JSON input",
// or one naming Go's types ("cannot unmarshal array into Go value of type
// struct { ID string ...", "Go struct field PushConfig...").
func TestV03PushParamsRefusedInClientWords(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithPush("127.0.0.1"))
	for _, c := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/list"}`, "params are required"},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":["t"]}`, "params must be an object"},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"id":"t","pushNotificationConfigId":5}}`,
			"params: pushNotificationConfigId: cannot be a JSON number"},
	} {
		_, b := testkit.Do(t, "POST", p.URL+"/a2a", c.body, "Content-Type", "application/json")
		got := string(b)
		if !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, c.want) || strings.Contains(got, "Go ") {
			t.Errorf("%s:\n %s\nwant -32602 saying %q", c.body, got, c.want)
		}
	}
}

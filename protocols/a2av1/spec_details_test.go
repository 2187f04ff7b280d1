package a2av1_test

import (
	"context"
	"encoding/json"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

func rawCall(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

func echoAgent() agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "echo"); err != nil {
			return err
		}
		return w.Complete(map[string]any{"content": "echo"})
	})
}

// echoPipeline is a pipeline serving the three A2A v1.0 bindings with one
// pool, demo, answering with echoAgent.
func echoPipeline(t *testing.T) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	p.Pool("demo", echoAgent())
	return p
}

// rpcCall posts a JSON-RPC call to the v1.0 JSON-RPC binding and decodes
// its answer.
func rpcCall(t *testing.T, p *pipetest.Pipeline, method, params string) (result json.RawMessage, code int, body string) {
	t.Helper()
	_, _, body = rawCall(t, "POST", p.URL+a2av1.Path, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`,
		map[string]string{"A2A-Version": "1.0"})
	data := body
	if i := strings.Index(body, "data: "); i >= 0 && !strings.HasPrefix(body, "{") {
		// A stream: its first event.
		data, _, _ = strings.Cut(body[i+len("data: "):], "\n")
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		t.Fatalf("%s: answer %q: %v", method, body, err)
	}
	if r.Error != nil {
		code = r.Error.Code
	}
	return r.Result, code, body
}

// TestJSONRPCInvalidParamsNotParseError: a JSON-RPC call whose body is
// valid JSON but whose params are not a valid request (a part with no
// content or two, a part's raw bytes not base64, a statusTimestampAfter
// that is no timestamp) is -32602 Invalid params (A2A v1.0 §9.5: -32700
// is "The server received invalid JSON"; §3.3.2 validation errors are
// "-32602 Invalid params", the §9.5 example answering a bad message.parts
// with -32602). The binding answers -32700, which a2a-go/v2's client reads
// as ErrParseError rather than ErrInvalidParams.
func TestJSONRPCInvalidParamsNotParseError(t *testing.T) {
	p := echoPipeline(t)
	for _, c := range []struct{ method, params string }{
		{"SendMessage", `{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{}]}}`},
		{"SendMessage", `{"message":{"role":"ROLE_USER","messageId":"m2","parts":[{"text":"x","data":{"a":1}}]}}`},
		{"SendMessage", `{"message":{"role":"ROLE_USER","messageId":"m3","parts":[{"raw":"!!!"}]}}`},
		{"SendStreamingMessage", `{"message":{"role":"ROLE_USER","messageId":"m4","parts":[{}]}}`},
		{"ListTasks", `{"statusTimestampAfter":"yesterday"}`},
	} {
		_, code, body := rpcCall(t, p, c.method, c.params)
		if code != -32602 {
			t.Errorf("%s %s: answered %.200s; want error -32602 Invalid params (the body is valid JSON)", c.method, c.params, body)
		}
	}
}

// TestHistoryKeepsNonTextUserMessage: the task's history holds the
// user's message whatever its parts. A message of a data part only (or a
// file part only) is missing from GetTask's history, the blocking answer's
// and ListTasks', where a text message is there: docs/protocols.md
// ("A blocking answer that is a new task's Task holds the user's message
// in its history, as tasks/get / GetTask then show it"); a2a.proto Task
// .history "The history of interactions from a Task", §3.2.4 historyLength
// "Return at most this many recent messages from the task's history".
func TestHistoryKeepsNonTextUserMessage(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("ask")))
	p.Pool("ask", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return agent.Interrupt(w, e2a.StateInputRequired, "which one?")
	}))
	for _, c := range []struct{ id, part string }{
		{"data-only", `{"data":{"city":"Paris"}}`},
		{"file-only", `{"url":"https://example.com/a.txt","mediaType":"text/plain","filename":"a.txt"}`},
	} {
		res, code, body := rpcCall(t, p, "SendMessage", `{"message":{"role":"ROLE_USER","messageId":"`+c.id+`","parts":[`+c.part+`]}}`)
		if code != 0 {
			t.Fatalf("%s: SendMessage %s", c.id, body)
		}
		var sent struct {
			Task struct {
				ID      string `json:"id"`
				History []struct {
					MessageID string `json:"messageId"`
					Role      string `json:"role"`
				} `json:"history"`
			} `json:"task"`
		}
		if err := json.Unmarshal(res, &sent); err != nil || sent.Task.ID == "" {
			t.Fatalf("%s: SendMessage answered %s (%v); want a task", c.id, body, err)
		}
		inHistory := func(raw json.RawMessage) bool {
			var task struct {
				History []struct {
					MessageID string `json:"messageId"`
					Role      string `json:"role"`
				} `json:"history"`
			}
			_ = json.Unmarshal(raw, &task)
			for _, m := range task.History {
				if m.MessageID == c.id && m.Role == "ROLE_USER" {
					return true
				}
			}
			return false
		}
		var answer struct {
			Task json.RawMessage `json:"task"`
		}
		_ = json.Unmarshal(res, &answer)
		if !inHistory(answer.Task) {
			t.Errorf("%s: the blocking answer's history lacks the user's message %s: %s", c.id, c.id, body)
		}
		got, _, body := rpcCall(t, p, "GetTask", `{"id":"`+sent.Task.ID+`"}`)
		if !inHistory(got) {
			t.Errorf("%s: GetTask's history lacks the user's message %s: %s", c.id, c.id, body)
		}
		code, _, rest := rawCall(t, "GET", p.URL+a2av1.Path+"/tasks/"+sent.Task.ID, "", map[string]string{"A2A-Version": "1.0"})
		if code != http.StatusOK || !inHistory(json.RawMessage(rest)) {
			t.Errorf("%s: HTTP+JSON GetTask's history lacks the user's message %s: %d %s", c.id, c.id, code, rest)
		}
	}
}

// TestJSONRPCRefusalDataIsTypedDetails: an error of the v1.0 JSON-RPC
// binding carries its details in error.data as an array of objects, each
// with an @type (A2A v1.0 §9.5: "Error Details: Mapped to error.data
// (array of objects, each containing a @type key, using ProtoJSON Any
// representation)", "Each object in the data array MUST include a @type
// key"). The gate's rate-limit refusal on /a2a/v1 writes data as a bare
// object ({"error","message","retry_after"}), which a client decoding
// data as the spec's details (a2a-go/v2's []*errordetails.Typed) cannot
// read.
func TestJSONRPCRefusalDataIsTypedDetails(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("demo"),
		ingress.WithLimiter(ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 1}}, ingress.WithLimiterClock(testkit.MidMinute())))))
	p.Pool("demo", echoAgent())
	var code int
	var body string
	for range 2 { // the second call is over the limit
		code, _, body = rawCall(t, "POST", p.URL+a2av1.Path, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`,
			map[string]string{"A2A-Version": "1.0"})
	}
	if code != http.StatusTooManyRequests {
		t.Fatalf("second call: %d %s; want the rate limit's 429", code, body)
	}
	var r struct {
		Error struct {
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	if len(r.Error.Data) == 0 {
		return // no details: allowed
	}
	var details []map[string]any
	if err := json.Unmarshal(r.Error.Data, &details); err != nil {
		t.Fatalf("error.data %s is not an array of detail objects (§9.5): %v", r.Error.Data, err)
	}
	for _, d := range details {
		if _, ok := d["@type"].(string); !ok {
			t.Errorf("error.data detail %v has no @type (§9.5)", d)
		}
	}
}

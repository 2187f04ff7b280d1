package ingress_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestA2ARetriedNewTaskKeepsItsContext: the retry of a message that
// started a task (the same Idempotency-Key, a duplicate: nothing is
// published) is answered as the first call was, in the task's context.
// The answer named a context made up for the retry (the adapter's fresh
// contextId, or the one the retry named), a context no task is in: a
// client that continued the conversation with it started another one.
// v0.3 message/send, v1.0 SendMessage (JSON-RPC and HTTP+JSON).
func TestA2ARetriedNewTaskKeepsItsContext(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	post := func(path, key, body string) map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return v
	}
	// contextOf returns the task's contextId in an answer, and those of
	// its history's messages.
	contextOf := func(task map[string]any) []string {
		out := []string{task["contextId"].(string)}
		hist, _ := task["history"].([]any)
		for _, m := range hist {
			out = append(out, m.(map[string]any)["contextId"].(string))
		}
		return out
	}
	for _, c := range []struct {
		name, path, body string
		task             func(map[string]any) map[string]any
	}{
		{"v0.3 message/send", "/a2a",
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1",%CTX%"parts":[{"kind":"text","text":"hi"}]}}}`,
			func(v map[string]any) map[string]any { return v["result"].(map[string]any) }},
		{"v1.0 SendMessage", "/a2a/v1",
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1",%CTX%"parts":[{"text":"hi"}]}}}`,
			func(v map[string]any) map[string]any { return v["result"].(map[string]any)["task"].(map[string]any) }},
		{"v1.0 message:send", "/a2a/v1/message:send",
			`{"message":{"role":"ROLE_USER","messageId":"m1",%CTX%"parts":[{"text":"hi"}]}}`,
			func(v map[string]any) map[string]any { return v["task"].(map[string]any) }},
	} {
		key := "retry-ctx-" + strings.NewReplacer(" ", "-", "/", "-", ":", "-", ".", "-").Replace(c.name)
		first := c.task(post(c.path, key, strings.Replace(c.body, "%CTX%", "", 1)))
		want := first["contextId"].(string)
		for _, named := range []string{"", `"contextId":"` + key + `-other",`} {
			again := c.task(post(c.path, key, strings.Replace(c.body, "%CTX%", named, 1)))
			if again["id"] != first["id"] {
				t.Fatalf("%s: the retry answered task %v, want %v", c.name, again["id"], first["id"])
			}
			for _, got := range contextOf(again) {
				if got != want {
					t.Errorf("%s: the retry (contextId named: %q) answered context %q, want the task's %q", c.name, named, got, want)
				}
			}
		}
	}
}

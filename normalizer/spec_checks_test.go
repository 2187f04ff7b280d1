package normalizer_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestAgentVaultMessageRoles: the AgentVault profile's messages are the
// user's ("user") or the agent's ("assistant"); any other role, "system"
// (which would let a client speak as the agent's system prompt) and A2A's
// "agent" included, is refused as the profile refuses bad params:
// JSON-RPC -32602 with the request's id.
func TestAgentVaultMessageRoles(t *testing.T) {
	n := testNormalizer(t)
	body := func(role string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"r-1","method":"tasks/send","params":{"message":{"role":"` + role + `","parts":[{"type":"text","content":"hi"}]}}}`)
	}
	for _, role := range []string{"user", "assistant"} {
		if _, err := n.FromAgentVault(normalizer.Input{Body: body(role)}); err != nil {
			t.Errorf("role %q refused: %v", role, err)
		}
	}
	for _, role := range []string{"system", "agent", "", "User", "tool"} {
		_, err := n.FromAgentVault(normalizer.Input{Body: body(role)})
		if !errors.Is(err, normalizer.ErrInvalidParams) || normalizer.JSONRPCCode(err) != -32602 {
			t.Errorf("role %q: err = %v, want invalid params (-32602)", role, err)
			continue
		}
		if id := string(normalizer.ErrorJSONRPCID(err)); id != `"r-1"` {
			t.Errorf("role %q: error id %s, want the request's", role, id)
		}
	}
}

// TestACPEmptyPromptFollowsSchema: ACP's schema requires session/prompt's
// prompt (an array of content blocks) but sets no minimum length, and a
// text block's text may be empty: both are accepted as the SDK's
// PromptRequest.Validate accepts them; a missing or non-array prompt is
// refused with -32602.
func TestACPEmptyPromptFollowsSchema(t *testing.T) {
	n := testNormalizer(t)
	call := func(params string) error {
		_, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":` + params + `}`)})
		return err
	}
	for _, p := range []string{`{"sessionId":"s1","prompt":[]}`, `{"sessionId":"s1","prompt":[{"type":"text","text":""}]}`} {
		if err := call(p); err != nil {
			t.Errorf("%s refused: %v", p, err)
		}
	}
	for _, p := range []string{`{"sessionId":"s1"}`, `{"sessionId":"s1","prompt":null}`, `{"sessionId":"s1","prompt":{}}`} {
		if err := call(p); normalizer.JSONRPCCode(err) != -32602 {
			t.Errorf("%s: err = %v, want -32602", p, err)
		}
	}
}

// TestParseWorkflowBlankLinesMemory: blank lines cost no memory: a
// workflow after 4 MiB of newlines (what a body may hold) is parsed
// without a slice of 4 Mi line headers (64 MiB).
func TestParseWorkflowBlankLinesMemory(t *testing.T) {
	jsonl := strings.Repeat("\n", 4<<20) + `{"type":"operationUpdate","operationId":"a","operation":{"X":{}}}` + "\n" +
		`{"type":"beginExecution","executionId":"e","operationOrder":["a"]}`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w, lines := normalizer.ParseWorkflow(jsonl)
	runtime.ReadMemStats(&after)
	if lines != nil || w.ExecutionID != "e" {
		t.Fatalf("refused: %v", lines)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("parsing allocated %d bytes for %d bytes of input", n, len(jsonl))
	}
}

// TestACPEmbeddedResourceNeedsContents: an embedded resource block's
// resource is TextResourceContents {uri, text} or BlobResourceContents
// {uri, blob} (ACP schema): one with neither text nor blob is no content
// block, refused with -32602 as any block missing its required fields.
func TestACPEmbeddedResourceNeedsContents(t *testing.T) {
	n := testNormalizer(t)
	call := func(resource string) error {
		_, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"resource","resource":` + resource + `}]}}`)})
		return err
	}
	for _, r := range []string{`{"uri":"file:///a","text":""}`, `{"uri":"file:///a","blob":"aGk=","mimeType":"x/y"}`} {
		if err := call(r); err != nil {
			t.Errorf("%s refused: %v", r, err)
		}
	}
	for _, r := range []string{`{"uri":"file:///a"}`, `{"uri":"file:///a","text":5}`, `{"uri":"file:///a","blob":null}`, `{"text":"t"}`} {
		if err := call(r); normalizer.JSONRPCCode(err) != -32602 {
			t.Errorf("%s: err = %v, want -32602", r, err)
		}
	}
}

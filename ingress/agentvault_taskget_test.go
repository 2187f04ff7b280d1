package ingress_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestAgentVaultTasksGetHasReplies: AgentVault tasks/get of a finished task
// lists the user's message, the assistant's reasoning and its reply.
func TestAgentVaultTasksGetHasReplies(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":"av-1","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"weather?"}]}}}`)
	var sent struct{ Result struct{ ID string } }
	if err := jsonDecode(resp, &sent); err != nil || sent.Result.ID == "" {
		t.Fatalf("tasks/send: %+v %v", sent, err)
	}
	type avTask struct {
		State    string
		Messages []struct {
			Role  string
			Parts []struct{ Type, Content string }
		}
	}
	var task avTask
	testkit.Eventually(t, 20*time.Second, "the AgentVault task completed", func() bool {
		r := p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":"av-2","method":"tasks/get","params":{"id":"`+sent.Result.ID+`"}}`)
		b, _ := io.ReadAll(r.Body)
		var out struct{ Result avTask }
		if json.Unmarshal(b, &out) != nil {
			return false
		}
		task = out.Result
		return task.State == "COMPLETED"
	})
	var roles []string
	var all string
	for _, m := range task.Messages {
		roles = append(roles, m.Role)
		for _, pt := range m.Parts {
			all += pt.Content + "|"
		}
	}
	if len(task.Messages) < 3 || task.Messages[0].Role != "user" || !strings.Contains(all, "Thinking about: weather?") || !strings.Contains(all, "You said: weather?") {
		t.Fatalf("tasks/get messages %v: %s", roles, all)
	}
}

package jsclient

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// continuationScript: the pinned SDK's client asks the demo agent a
// question ("ask:input the weather": input-required), answers it on the
// task, then gets the task; prints the answer's result and the got task.
const continuationScript = `
import { randomUUID } from 'node:crypto';
const [base, generation, binding] = process.argv.slice(1);
const out = {};
if (generation === 'v1') {
  const { ClientFactory, ClientFactoryOptions } = await import('@a2a-js/sdk/client');
  const { SendMessageRequest, taskStateToJSON } = await import('@a2a-js/sdk');
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] });
  const client = await new ClientFactory(options).createFromUrl(base);
  const asked = await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'ask:input the weather' }] } }));
  const task = asked.payload?.value ?? asked;
  out.asked_kind = asked.payload?.$case ?? (asked.status ? 'task' : 'message');
  out.asked_state = taskStateToJSON(task.status?.state);
  const answer = await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', taskId: task.id, contextId: task.contextId, parts: [{ text: 'Paris' }] } }));
  const a = answer.payload?.value ?? answer;
  out.answer_kind = answer.payload?.$case ?? (a.status ? 'task' : 'message');
  out.answer_id = a.id ?? a.taskId ?? '';
  out.answer_state = a.status ? taskStateToJSON(a.status.state) : '';
  out.answer_context = a.contextId ?? '';
  out.answer_history = (a.history ?? []).length;
  const got = await client.getTask({ id: task.id, historyLength: undefined, tenant: '' });
  out.task_id = task.id; out.context_id = task.contextId;
  out.get_state = taskStateToJSON(got.status?.state);
  out.get_history = (got.history ?? []).length;
} else {
  const { ClientFactory } = await import('a2a-js-sdk-03/client');
  const client = await new ClientFactory().createFromUrl(base);
  const asked = await client.sendMessage({ message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'ask:input the weather' }] } });
  out.asked_kind = asked.kind; out.asked_state = asked.status?.state;
  const a = await client.sendMessage({ message: { kind: 'message', messageId: randomUUID(), role: 'user', taskId: asked.id, contextId: asked.contextId, parts: [{ kind: 'text', text: 'Paris' }] } });
  out.answer_kind = a.kind; out.answer_id = a.id ?? a.taskId ?? ''; out.answer_state = a.status?.state ?? '';
  out.answer_context = a.contextId ?? ''; out.answer_history = (a.history ?? []).length;
  const got = await client.getTask({ id: asked.id });
  out.task_id = asked.id; out.context_id = asked.contextId;
  out.get_state = got.status?.state; out.get_history = (got.history ?? []).length;
}
console.log(JSON.stringify(out));
`

// TestJSContinuationAnsweredWithTheTask: @a2a-js/sdk 1.x (both v1.0
// bindings) and 0.3.x answer the demo agent's input-required question on
// the task with a blocking sendMessage: the answer is the Task (its id and
// context the task's), completed, with the task's earlier turns in its history (the thought and
// tool messages GetTask adds are left out of a client that did not declare
// the interaction spec: a2amap.Params.Interaction, by design).
func TestJSContinuationAnsweredWithTheTask(t *testing.T) {
	installed(t)
	base := pipeline(t)
	for _, tc := range []struct {
		name, done string
		args       []string
	}{
		{"sdk-1.x/JSONRPC", "TASK_STATE_COMPLETED", []string{base, "v1", "JSONRPC"}},
		{"sdk-1.x/HTTP+JSON", "TASK_STATE_COMPLETED", []string{base, "v1", "HTTP+JSON"}},
		{"sdk-0.3/JSONRPC", "completed", []string{base, "v03"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", append([]string{"--input-type=module", "-e", continuationScript, "--"}, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, stderr.String())
			}
			var s map[string]any
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("%q: %v", b, err)
			}
			if s["answer_kind"] != "task" || s["answer_id"] != s["task_id"] || s["answer_context"] != s["context_id"] ||
				s["answer_state"] != tc.done || s["get_state"] != tc.done || s["answer_history"].(float64) < 3 {
				t.Fatalf("continuation %v: want the answer the Task %v (same id and context), %s, its history the question's turn and the answer (at least 3 messages)", s, s["task_id"], tc.done)
			}
		})
	}
}

package ingress_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestAgentVaultCancelNotHeldByUnpublishedTurn: AgentVault tasks/cancel
// reads the task while its record lists G after the running turn, G a
// turn whose publish then fails (taken out of the record again, never
// stored: here an id recorded as a turn is before its publish, and taken
// out once the cancel has read the task). The cancel awaited G's store up
// to the publish wait (6 s) before it cancelled the running turn, not
// noticing G was taken out; it reads the task's record again as it waits
// now (egress.WithListing, the record as the task store's leader holds
// it: host.Tasks.Listing), and cancels at once. A2A v0.3 tasks/cancel
// (host.Tasks.CancelRunning) did already.
func TestAgentVaultCancelNotHeldByUnpublishedTurn(t *testing.T) {
	for _, c := range []struct {
		name, send string
		canceled   func(result json.RawMessage) bool
	}{
		{"AgentVault", `{"jsonrpc":"2.0","id":"av-1","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"first"}]}}}`,
			func(result json.RawMessage) bool {
				var r struct {
					Success bool
					Message string
				}
				return json.Unmarshal(result, &r) == nil && r.Success && r.Message == "Task canceled."
			}},
		{"v0.3", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},` +
			`"message":{"kind":"message","role":"user","messageId":"m-first","parts":[{"kind":"text","text":"first"}]}}}`,
			func(result json.RawMessage) bool {
				var r struct{ Status struct{ State string } }
				return json.Unmarshal(result, &r) == nil && r.Status.State == "canceled"
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pp, started, _ := runningTaskPipeline(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, body, err := postRPC(ctx, pp.URL+"/a2a", c.send)
			var sent struct{ Result struct{ ID string } }
			if err != nil || json.Unmarshal([]byte(body), &sent) != nil || sent.Result.ID == "" {
				t.Fatalf("the first message: %s %v", body, err)
			}
			id := sent.Result.ID
			testkit.Receive(t, started, 30*time.Second, "the first turn did not start")

			ts, err := ingress.NewTaskStore(ctx, pp.JS)
			if err != nil {
				t.Fatal(err)
			}
			g := uuid.Must(uuid.NewV7()).String()
			if _, err := ts.Append(ctx, ingress.KindTask, *record(t, pp.JS, ingress.KindTask, id), g,
				tenant.Principal{ID: ingress.DefaultAnonymousPrincipal, Open: true}); err != nil {
				t.Fatal(err)
			}
			// tasks/cancel reads the task twice (the protocol it is answered
			// in, then the task it cancels): G is taken out once the second
			// read has listed it, before the cancel uses it.
			var reads atomic.Int32
			removed := make(chan error, 1)
			ingress.SetRecordReadHook(pp.Ingress, nil, func(taskID string, ids []string) {
				if taskID == id && slices.Contains(ids, g) && reads.Add(1) == 2 {
					removed <- ts.Remove(ctx, ingress.KindTask, id, g)
				}
			})
			t.Cleanup(func() { ingress.SetRecordReadHook(pp.Ingress, nil, nil) })

			from := time.Now()
			_, body, err = postRPC(ctx, pp.URL+"/a2a", `{"jsonrpc":"2.0","id":"c-1","method":"tasks/cancel","params":{"id":"`+id+`"}}`)
			took := time.Since(from)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-removed:
				if err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("tasks/cancel answered %s without reading the task twice while its record listed G", body)
			}
			var got struct{ Result json.RawMessage }
			if err := json.Unmarshal([]byte(body), &got); err != nil || !c.canceled(got.Result) {
				t.Fatalf("tasks/cancel answered %s (%v), want the task canceled", body, err)
			}
			if took > quick {
				t.Errorf("tasks/cancel took %v: held by a turn listed when read and taken out of the record since", took)
			}
		})
	}
}

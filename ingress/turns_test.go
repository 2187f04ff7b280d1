package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	acp "github.com/coder/acp-go-sdk"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestTaskStoreTurnsChain: turns appended at once to one task form a chain:
// each, as Append returns the record, follows the request before it in the
// final record (never two after the same one); a retried append returns the
// same predecessor; Remove takes a request out and leaves the others.
func TestTaskStoreTurnsChain(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	alice := tenant.Principal{ID: "alice"}
	base := ingress.TaskRecord{ID: "t-chain", Protocol: "a2a", Principal: "alice"}
	if _, err := ts.AppendNew(ctx, ingress.KindTask, base, "r-0", alice); err != nil {
		t.Fatal(err)
	}
	const n = 12
	after := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("r-%d", i+1)
			rec, err := ts.Append(ctx, ingress.KindTask, base, id, alice)
			if err != nil {
				t.Errorf("append %s: %v", id, err)
				return
			}
			after[i] = rec.Before(id)
		}()
	}
	wg.Wait()
	got, err := ts.Get(ctx, ingress.KindTask, "t-chain")
	if err != nil || len(got.RequestIDs) != n+1 || got.RequestIDs[0] != "r-0" {
		t.Fatalf("record %+v %v", got, err)
	}
	for i := range n {
		id := fmt.Sprintf("r-%d", i+1)
		if want := got.Before(id); after[i] != want || want == "" {
			t.Errorf("%s appended after %q; the record has it after %q", id, after[i], want)
		}
	}
	mid := got.RequestIDs[5]
	rec, err := ts.Append(ctx, ingress.KindTask, base, mid, alice)
	if err != nil || rec.Before(mid) != got.RequestIDs[4] || len(rec.RequestIDs) != n+1 {
		t.Fatalf("retried append of %s: %+v %v", mid, rec, err)
	}
	if err := ts.Remove(ctx, ingress.KindTask, "t-chain", mid); err != nil {
		t.Fatal(err)
	}
	if err := ts.Remove(ctx, ingress.KindTask, "t-chain", "absent"); err != nil {
		t.Fatal(err)
	}
	got2, err := ts.Get(ctx, ingress.KindTask, "t-chain")
	if err != nil || len(got2.RequestIDs) != n || got2.Before(got.RequestIDs[6]) != got.RequestIDs[4] {
		t.Fatalf("after Remove: %+v %v", got2, err)
	}
}

// turnFrames returns the stream sequences of the first and the final
// message of each request, in E2A_RESPONSES.
func turnFrames(t *testing.T, nc *nats.Conn, ids []string) (first, final []uint64) {
	t.Helper()
	for _, id := range ids {
		subj, err := subjects.Response(id)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := streams.DirectGetAll(context.Background(), nc, streams.ResponsesStream, subj, 0, 1024)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("frames of %s: %d %v", id, len(msgs), err)
		}
		first = append(first, msgs[0].Seq)
		final = append(final, msgs[len(msgs)-1].Seq)
	}
	return first, final
}

// checkTurnsInOrder checks that each turn's first frame is stored after the
// final frame of the turn before.
func checkTurnsInOrder(t *testing.T, nc *nats.Conn, ids []string) {
	t.Helper()
	first, final := turnFrames(t, nc, ids)
	for i := 1; i < len(ids); i++ {
		if first[i] <= final[i-1] {
			t.Errorf("turn %d's first frame at stream sequence %d, turn %d's final frame at %d", i+1, first[i], i, final[i-1])
		}
	}
}

// record reads the task or session record kind/id.
func record(t *testing.T, js jetstream.JetStream, kind, id string) *ingress.TaskRecord {
	t.Helper()
	ts, err := ingress.NewTaskStore(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ts.Get(context.Background(), kind, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestA2ATurnsNeverOverlap: an A2A v1.0 client (a2a-go/v2) sends a message
// that runs ~0.7 s, then at once a second one to the same task, which alone
// would end first. The second turn starts only after the first's final
// frame; GetTask never shows the task terminal before both turns' final
// frames are stored; the final task holds both user messages and both
// replies, in order.
func TestA2ATurnsNeverOverlap(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := &a2a.SendMessageConfig{ReturnImmediately: true}

	first := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("first"))
	first.Metadata = map[string]any{"delay_ms": 80}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: first, Config: now})
	if err != nil {
		t.Fatalf("first SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("first SendMessage result %T", res)
	}
	second := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("second"))
	second.TaskID, second.ContextID = task.ID, task.ContextID
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: second, Config: now}); err != nil {
		t.Fatalf("second SendMessage: %v", err)
	}
	rec := record(t, p.js, ingress.KindTask, string(task.ID))
	if len(rec.RequestIDs) != 2 {
		t.Fatalf("task record %+v", rec)
	}
	var final *a2a.Task
	testkit.Eventually(t, 20*time.Second, "the task's final state", func() bool {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		if !got.Status.State.Terminal() {
			return false
		}
		// Terminal: every turn has ended.
		for i, id := range rec.RequestIDs {
			subj, _ := subjects.Response(id)
			m, err := streams.LastBySubject(ctx, p.nc, streams.ResponsesStream, subj)
			if err != nil || !strings.Contains(string(m.Data), `"is_final":true`) {
				t.Fatalf("GetTask answered %s before turn %d's final frame (%v)", got.Status.State, i+1, err)
			}
		}
		final = got
		return true
	})
	checkTurnsInOrder(t, p.nc, rec.RequestIDs)
	if final.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("final state %s", final.Status.State)
	}
	var said []string
	for _, m := range final.History {
		role := "agent"
		if m.Role == a2a.MessageRoleUser {
			role = "user"
		}
		said = append(said, role+": "+v1Text(m.Parts))
	}
	var art string
	for _, a := range final.Artifacts {
		art += v1Text(a.Parts)
	}
	got := strings.Join(said, " | ") + " | artifacts: " + art
	i1, r1 := strings.Index(got, "user: first"), strings.Index(got, "You said: first")
	i2, r2 := strings.Index(got, "user: second"), strings.Index(got, "You said: second")
	if i1 < 0 || r1 < i1 || i2 < r1 || r2 < i2 {
		t.Fatalf("history not both turns in order: %s", got)
	}
}

// TestACPPromptsQueued: ACP asks a client to wait for a prompt's end
// before the next; one that sends a second prompt to the session while the
// first runs (acp-go-sdk over stdio) gets it answered after the first:
// the session's updates are the first turn's, then the second's, never
// interleaved, and the second turn's frames follow the first's final one.
func TestACPPromptsQueued(t *testing.T) {
	in, out, _, nc := startStdioConn(t)
	ctx, conn, client, sid := openStdioSession(t, in, out, 30*time.Second)
	prompt := func(text string, delay int) (acp.PromptResponse, error) {
		return conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)},
			Meta: map[string]any{"e2a_params": map[string]any{"delay_ms": delay}}})
	}
	client.Forget()
	results := make(chan error, 2)
	go func() {
		res, err := prompt("one", 80)
		if err == nil && res.StopReason != acp.StopReasonEndTurn {
			err = fmt.Errorf("stop reason %s", res.StopReason)
		}
		results <- err
	}()
	client.WaitUpdate(t, sid) // the first prompt runs
	go func() {
		res, err := prompt("two", 10)
		if err == nil && res.StopReason != acp.StopReasonEndTurn {
			err = fmt.Errorf("stop reason %s", res.StopReason)
		}
		results <- err
	}()
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("prompt: %v", err)
		}
	}
	if kinds, text := updateKinds(client.Take(sid)); kinds != demoTurn+" "+demoTurn || text != "You said: oneYou said: two" {
		t.Fatalf("updates %q, text %q", kinds, text)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, js, ingress.KindSession, string(sid))
	if len(rec.RequestIDs) != 2 {
		t.Fatalf("session record %+v", rec)
	}
	checkTurnsInOrder(t, nc, rec.RequestIDs)
}

// framesOfRequest reads every stored frame of a request.
func framesOfRequest(t *testing.T, nc *nats.Conn, id string) []*e2a.Response {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := streams.DirectGetAll(context.Background(), nc, streams.ResponsesStream, subj, 0, 1024)
	if err != nil && !errors.Is(err, streams.ErrNoMessages) {
		t.Fatal(err)
	}
	var out []*e2a.Response
	for _, m := range msgs {
		fr, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fr...)
	}
	return out
}

// TestA2ACancelQueuedTask: CancelTask on a task whose second turn waits
// for its first cancels both, the waiting one first (its handler never
// runs), so the task is not left canceled while its first turn runs on.
func TestA2ACancelQueuedTask(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := &a2a.SendMessageConfig{ReturnImmediately: true}
	first := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow"))
	first.Metadata = map[string]any{"delay_ms": 300}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: first, Config: now})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	second := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("queued"))
	second.TaskID = task.ID
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: second, Config: now}); err != nil {
		t.Fatal(err)
	}
	rec := record(t, p.js, ingress.KindTask, string(task.ID))
	testkit.Eventually(t, 10*time.Second, "the first turn running", func() bool {
		return len(framesOfRequest(t, p.nc, rec.RequestIDs[0])) > 0
	})
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v %v", got, err)
	}
	for i, id := range rec.RequestIDs {
		var fr []*e2a.Response
		testkit.Eventually(t, 10*time.Second, "the turn's final frame", func() bool {
			fr = framesOfRequest(t, p.nc, id)
			return len(fr) > 0 && fr[len(fr)-1].IsFinal
		})
		if e, _ := fr[len(fr)-1].Error(); e.Code != e2a.ErrCodeCancelled {
			t.Errorf("turn %d ended %+v", i+1, fr[len(fr)-1])
		}
		if i == 1 && len(fr) != 1 {
			t.Errorf("the waiting turn wrote %d frames: its handler ran", len(fr))
		}
	}
}

// TestACPCancelQueuedPrompts: over HTTP, a session with a prompt running
// and a second one queued after it: session/cancel ends both with
// stopReason cancelled, the queued one without running (one final frame).
func TestACPCancelQueuedPrompts(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	prompt := func(id, delay string) *bufio.Scanner {
		resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":"`+id+`","method":"session/prompt","params":{"sessionId":"`+sid+
			`","prompt":[{"type":"text","text":"`+id+`"}],"_meta":{"e2a_params":{"delay_ms":`+delay+`}}}}`)
		return bufio.NewScanner(resp.Body)
	}
	first := prompt("one", "300")
	if !first.Scan() {
		t.Fatal("no update of the first prompt")
	}
	stops := make(chan string, 2)
	readStop := func(sc *bufio.Scanner) {
		var last rpcMsg
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				last = decodeMsg(t, sc.Bytes())
			}
		}
		var res struct {
			StopReason string `json:"stopReason"`
		}
		_ = json.Unmarshal(last.Result, &res)
		stops <- res.StopReason
	}
	go readStop(first)
	go readStop(prompt("two", "0"))
	testkit.Eventually(t, 10*time.Second, "the second prompt recorded", func() bool {
		return len(record(t, p.js, ingress.KindSession, sid).RequestIDs) == 2
	})
	if m := p.acpCall(t, `{"jsonrpc":"2.0","id":"c","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`); m.Error != nil {
		t.Fatalf("session/cancel: %+v", m.Error)
	}
	for range 2 {
		if stop := <-stops; stop != "cancelled" {
			t.Errorf("a prompt ended %q", stop)
		}
	}
	rec := record(t, p.js, ingress.KindSession, sid)
	if fr := framesOfRequest(t, p.nc, rec.RequestIDs[1]); len(fr) != 1 {
		t.Errorf("the queued prompt wrote %d frames: it ran", len(fr))
	}
}

// TestConflictingTurnNeverRecorded: a continuing message/send whose
// Idempotency-Key is another principal's request id is the conflict, and
// the caller's task record is never written with it, not even for the
// moment before the publish finds the id taken (the caller's tasks/get of
// its own task would load the other's envelope and frames then): every
// revision of the record, watched from before the sends, is checked.
func TestConflictingTurnNeverRecorded(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(aliceAndBob(t)))
	rpc := func(key, idem, body string) (int, string) {
		hdr := []string{"X-Api-Key", key}
		if idem != "" {
			hdr = append(hdr, "Idempotency-Key", idem)
		}
		resp, b := testkit.Do(t, http.MethodPost, p.url+"/a2a", body, hdr...)
		return resp.StatusCode, string(b)
	}
	if code, b := rpc(testKey, "alice-req-1", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-a","parts":[{"kind":"text","text":"alice-secret-text"}],"metadata":{"frames":1}}}}`); code != 200 || !strings.Contains(b, "alice-secret-text") {
		t.Fatalf("alice: %d %s", code, b)
	}
	// Bob's task, open while its first turn runs (≈ 3 × delay_ms: a
	// finished task refuses messages before any publish).
	code, b := rpc(bobKey, "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","role":"user","messageId":"m-bob","parts":[{"kind":"text","text":"bob"}],"metadata":{"delay_ms":700,"frames":0}}}}`)
	var task struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	if code != 200 || json.Unmarshal([]byte(b), &task) != nil || task.Result.ID == "" {
		t.Fatalf("bob's task: %d %s", code, b)
	}
	ctx := context.Background()
	kv, err := p.js.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := subjects.EncodeID(task.Result.ID)
	if err != nil {
		t.Fatal(err)
	}
	key := ingress.KindTask + "." + tok
	w, err := kv.Watch(ctx, key, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 3 {
		code, b := rpc(bobKey, "alice-req-1", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-b`+
			strconv.Itoa(i)+`","parts":[{"kind":"text","text":"bob-again"}],"taskId":"`+task.Result.ID+`"}}}`)
		if !strings.Contains(b, `"conflict":true`) || strings.Contains(b, "alice-secret-text") {
			t.Fatalf("bob's send %d with alice's request id: %d %s, want the conflict", i+1, code, b)
		}
	}
	if _, got := rpc(bobKey, "", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+task.Result.ID+`"}}`); strings.Contains(got, "alice-secret-text") {
		t.Errorf("bob's tasks/get of his own task shows alice's request: %.500s", got)
	}
	// A write after the sends marks the end of the watch.
	if _, err := kv.Put(ctx, key, []byte(`{"end":true}`)); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			if strings.Contains(string(e.Value()), "alice-req-1") {
				t.Errorf("bob's task record was written with alice's request id (revision %d): %s", e.Revision(), e.Value())
			}
			if string(e.Value()) == `{"end":true}` {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the watch of the task record never saw the end mark")
		}
	}
}

// TestCancelWhileTurnPublishes: tasks/cancel while the task's newest turn
// is recorded but not yet stored (publishTurn writes the record before its
// publish; here a turn whose publish never lands) is no "Task not found":
// the newest turn is waited for as a queued one, and the turn running
// before it is cancelled.
func TestCancelWhileTurnPublishes(t *testing.T) {
	p := startPipelineWith(t, ingress.WithPublishTimeout(200*time.Millisecond))
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow"))
	first.Metadata = map[string]any{"delay_ms": 2000, "frames": 0}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: first, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	testkit.Eventually(t, 10*time.Second, "the first turn running", func() bool {
		return len(framesOfRequest(t, p.nc, string(task.ID))) > 0
	})
	ts, err := ingress.NewTaskStore(ctx, p.js)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ts.Append(ctx, ingress.KindTask, ingress.TaskRecord{ID: string(task.ID), Protocol: "a2a", Pool: "demo"},
		"turn-publishing", tenant.Principal{Open: true})
	if err != nil || len(rec.RequestIDs) != 2 {
		t.Fatalf("record the second turn: %+v %v", rec, err)
	}
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v %v", got, err)
	}
	var fr []*e2a.Response
	testkit.Eventually(t, 10*time.Second, "the first turn's final frame", func() bool {
		fr = framesOfRequest(t, p.nc, string(task.ID))
		return len(fr) > 0 && fr[len(fr)-1].IsFinal
	})
	if e, _ := fr[len(fr)-1].Error(); e.Code != e2a.ErrCodeCancelled {
		t.Errorf("the first turn ended %+v", fr[len(fr)-1])
	}
}

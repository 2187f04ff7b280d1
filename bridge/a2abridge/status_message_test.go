package a2abridge_test

import (
	"context"
	"iter"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// workingAgent says what it is doing in working status-updates between
// its answer's artifact updates: working "thinking ..." (a message with
// an id, metadata, extensions, a thought and a data part; the event's
// metadata), the answer's first text, working "checking" (the answer is
// appended to after it), the rest of the answer (its last chunk), then
// completed with no message and metadata of its own. The answer's first
// update names it, describes it and gives its extensions, each its own
// metadata.
type workingAgent struct{}

func (workingAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	working := func(id, text string, md map[string]any, more ...*a2a.Part) *a2a.TaskStatusUpdateEvent {
		m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, append([]*a2a.Part{a2a.NewTextPart(text)}, more...)...)
		m.ID, m.Metadata = id, map[string]any{"said": id}
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, m)
		ev.Metadata = md
		return ev
	}
	thought := a2a.NewTextPart("the user wants a number")
	thought.SetMeta("thought", true)
	first := working("status-think", "thinking ...", map[string]any{"ev": "think", "step": 1.0},
		thought, a2a.NewDataPart(map[string]any{"progress": 0.5}))
	first.Status.Message.Extensions = []string{"https://example.com/ext/status"}
	answer := func(appendTo bool, text string) *a2a.TaskArtifactUpdateEvent {
		ev := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart(text))
		ev.Append, ev.LastChunk = appendTo, appendTo
		ev.Artifact.Metadata = map[string]any{"chunk": text}
		if !appendTo {
			ev.Artifact.Name, ev.Artifact.Description = "Answer", "the number"
			ev.Artifact.Extensions = []string{"https://example.com/ext/answer"}
		}
		return ev
	}
	done := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)
	done.Metadata = map[string]any{"ev": "done"}
	evs := []a2a.Event{a2a.NewSubmittedTask(ec, ec.Message), first, answer(false, "The answer"),
		working("status-check", "checking", map[string]any{"ev": "check"}), answer(true, " is 42."), done}
	return func(yield func(a2a.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (workingAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// TestWorkingStatusMessagesAsSent: a bridged A2A agent's working
// status-updates with a message reach the pipeline's A2A clients as
// status-updates carrying that message (its id, role, parts, metadata
// and extensions) and the event's metadata, among the answer's artifact
// updates where the agent sent them, and the task (GetTask, tasks/get)
// has them as a2a-go/v2's server has them for a client of the agent
// itself: moved to history as the next status replaces them, their
// metadata merged into the task's, the answer its one artifact. A2A
// v1.0 (a2a-go/v2: stream, SendMessage's task, GetTask) and v0.3
// (a2a-go v0.3: message/stream, tasks/get). The bridge wrote their parts
// as the answer's text and an artifact: the clients saw artifacts the
// agent never sent, no status message, a history without them and none
// of their metadata. E2A clients get the status-updates as frames of
// their own, the answer's text without their words (which it had); ACP
// clients their parts as the agent's words, as before.
func TestWorkingStatusMessagesAsSent(t *testing.T) {
	t.Parallel()
	p := sameThroughPipeline(t, workingAgent{})
	// E2A's clients get the status-updates as the agent's frames, not as
	// the answer's text; ACP's their parts as the agent's words, as
	// before (its message and thought chunks).
	if s := openE2A(t, p, "agent").send(t, "hi"); s.text != "The answer is 42." || s.state != "completed" {
		t.Errorf("E2A: %s, text %q, want completed \"The answer is 42.\"", s.state, s.text)
	}
	if s := openACP(t, p, "agent").send(t, "hi"); s.text != "thinking ...The answerchecking is 42." || s.reasoning != "the user wants a number" {
		t.Errorf("ACP: text %q, thoughts %q, want the status messages' words among the answer's", s.text, s.reasoning)
	}
}

// sameThroughPipeline serves exec on a2a-go/v2's server and compares what
// its A2A clients see, called directly and through a pipeline bridging
// it (the pool "agent", returned): the v1.0 stream (AnswerEvents: the
// status-updates with a message or metadata among the artifacts' text
// and fields), SendMessage's task and GetTask's (TaskView, ArtifactsView),
// the v0.3 stream (a2a-go v0.3's client) and tasks/get. The tasks' and
// contexts' ids are not compared (the pipeline's client addresses the
// pipeline's task).
func sameThroughPipeline(t *testing.T, exec a2asrv.AgentExecutor) *pipetest.Pipeline {
	t.Helper()
	url, _ := startV1(t, exec)
	direct := up.Client(t, url)
	ctx := testCtx(t)
	// msg asks for the trpc interaction spec's parts (as v03Conv's
	// messages do): the pipeline's A2A doors keep a thought from a client
	// that does not.
	msg := func() *a2a.SendMessageRequest {
		req := up.Msg("hi")
		req.Message.Metadata = map[string]any{"interaction_spec_version": "0.1"}
		return req
	}
	wantStream := up.AnswerEvents(t, direct.SendStreamingMessage(ctx, msg()))
	res, err := direct.SendMessage(ctx, msg())
	if err != nil {
		t.Fatal(err)
	}
	task, err := direct.GetTask(ctx, &a2a.GetTaskRequest{ID: res.TaskInfo().TaskID})
	if err != nil {
		t.Fatal(err)
	}
	wantTask, wantArtifacts := up.TaskView(t, task), up.ArtifactsView(t, task)

	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	if got := up.AnswerEvents(t, c.SendStreamingMessage(ctx, msg())); got != wantStream {
		t.Errorf("the pipeline's A2A v1.0 stream\n%s\nwant the agent's\n%s", got, wantStream)
	}
	checkTask := func(what string, task *a2a.Task) {
		t.Helper()
		if got := up.TaskView(t, task); got != wantTask {
			t.Errorf("%s\n%s\nwant the agent's\n%s", what, got, wantTask)
		}
		if got := up.ArtifactsView(t, task); got != wantArtifacts {
			t.Errorf("%s: artifacts\n%s\nwant the agent's\n%s", what, got, wantArtifacts)
		}
	}
	sent := up.SentTask(t, ctx, c, msg())
	checkTask("SendMessage's task", sent)
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil {
		t.Fatal(err)
	}
	checkTask("GetTask", got)

	v03 := openV03(t, p, "agent").(*v03Conv)
	if got := up.AnswerEvents(t, up.V1Events(v03.c.SendStreamingMessage(ctx, v03.params("hi")))); got != wantStream {
		t.Errorf("the pipeline's A2A v0.3 stream\n%s\nwant the agent's\n%s", got, wantStream)
	}
	old, err := v03.c.SendMessage(ctx, v03.params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	old03, err := v03.c.GetTask(ctx, &a2a03.TaskQueryParams{ID: old.TaskInfo().TaskID})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := a2av0.ToV1Task(old03)
	if err != nil {
		t.Fatal(err)
	}
	checkTask("A2A v0.3 tasks/get", v1)
	return p
}

// endingAgent ends its turn in state with a status message of its own
// id, parts (a text and a data part), metadata and extensions, and the
// event's metadata: a question (input-required, auth-required), or the
// task's end. Its task has metadata of its own, one member of which the
// status-update's metadata replaces.
type endingAgent struct{ state a2a.TaskState }

func (a endingAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("Which one?"), a2a.NewDataPart(map[string]any{"choices": []any{"a", "b"}}))
	m.ID, m.Metadata, m.Extensions = "said-"+string(a.state), map[string]any{"said": string(a.state)}, []string{"https://example.com/ext/said"}
	end := a2a.NewStatusUpdateEvent(ec, a.state, m)
	end.Metadata = map[string]any{"ev": string(a.state)}
	task := a2a.NewSubmittedTask(ec, ec.Message)
	task.Metadata = map[string]any{"task": "mine", "ev": "overwritten"}
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(task, nil) && yield(end, nil)
	}
}

func (endingAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// TestFinalStatusMessagesAsSent: a bridged A2A agent's turn that ends
// asking for input (input-required, auth-required) or that ends its task
// itself (rejected, canceled, failed) with a status message reaches the
// pipeline's A2A clients as a client of the agent itself sees it
// (sameThroughPipeline): the final status-update's message with its id,
// parts, metadata and extensions, and the event's metadata, in the
// stream, the task and its history, and the task's metadata (the
// agent's Task's merged with the status-update's). The message's id was
// the pipeline's; a failed status's message was the pipeline's failure
// (the message's text alone, its code in metadata.error); the task's
// metadata lacked what the agent gave its Task.
func TestFinalStatusMessagesAsSent(t *testing.T) {
	t.Parallel()
	for _, st := range []a2a.TaskState{a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCanceled, a2a.TaskStateRejected, a2a.TaskStateFailed} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			sameThroughPipeline(t, endingAgent{st})
		})
	}
}

package a2aupstream

import (
	"context"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// executor is the agent: the scenarios, as an a2asrv.AgentExecutor.
type executor struct{ s *Server }

var _ a2asrv.AgentExecutor = (*executor)(nil)

// emit is a scenario's way out: it yields each event and reports whether
// the server still wants more.
type emit func(a2a.Event) bool

func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	text := firstText(ec.Message)
	name, body := Scenario(text)
	// late: works SlowInterval first, a continuation's answer too.
	late := name == Late
	if ec.StoredTask != nil {
		name, body = Answer, text
	}
	e.s.recordExecution(Execution{
		Scenario: name, TaskID: ec.TaskID, ContextID: ec.ContextID,
		Message: ec.Message, History: historyOf(ec.StoredTask), Continued: ec.StoredTask != nil,
	})
	return func(yield func(a2a.Event, error) bool) {
		out := emit(func(ev a2a.Event) bool { return yield(ev, nil) })
		if late {
			select {
			case <-time.After(e.s.opts.SlowInterval):
			case <-ctx.Done():
				return
			case <-e.s.closing:
				return
			}
			if name == Late {
				name = Stream
			}
		}
		if name == Message {
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(MessageText(body)))
			m.ContextID = ec.ContextID
			out(m)
			return
		}
		if name == Echo {
			out(echoTask(ec, text))
			return
		}
		if ec.StoredTask == nil && !out(a2a.NewSubmittedTask(ec, ec.Message)) {
			return
		}
		if !out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
			return
		}
		switch name {
		case Stream:
			e.stream(ec, body, out)
		case Tool:
			e.tool(ec, body, out)
		case Ask:
			if out(artifact(ec, AskArtifact, false, true, a2a.NewTextPart(AskChunk))) {
				out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, agentMessage(ec, "ask", AskQuestion)))
			}
		case Answer:
			if out(artifact(ec, ReplyArtifact, false, true, a2a.NewTextPart(AskReply(body)))) {
				out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
			}
		case Auth:
			e.auth(ctx, ec, out)
		case Fail:
			out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentMessage(ec, "fail", FailText(body))))
		case Slow:
			e.slow(ctx, ec, out)
		case File:
			e.file(ec, body, out)
		case Reject:
			out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateRejected, agentMessage(ec, "rejected", RejectText(body))))
		case AgentCancel:
			out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, agentMessage(ec, "agent-canceled", AgentCancelText(body))))
		case ArtifactMeta:
			e.artifactMeta(ec, body, out)
		case Big:
			n, _ := strconv.Atoi(body)
			if out(artifact(ec, TextArtifact, false, true, a2a.NewTextPart(strings.Repeat("x", max(n, 0))))) {
				out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
			}
		}
	}
}

// Cancel ends a task in canceled: for a running "slow:" the event reaches
// its execution, which a2a-go then stops (its context ends).
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.s.recordCancel(ec.TaskID)
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, agentMessage(ec, "canceled", CanceledText)), nil)
	}
}

func (e *executor) stream(ec *a2asrv.ExecutorContext, body string, out emit) {
	thought := a2a.NewTextPart(Thought(body))
	thought.SetMeta("thought", true)
	if !out(artifact(ec, ThoughtArtifact, false, true, thought)) {
		return
	}
	chunks := StreamChunks(body)
	for i, c := range chunks {
		if !out(artifact(ec, TextArtifact, i > 0, i == len(chunks)-1, a2a.NewTextPart(c))) {
			return
		}
	}
	if out(artifact(ec, DataArtifact, false, true, a2a.NewDataPart(StreamData()))) {
		out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
	}
}

func (e *executor) tool(ec *a2asrv.ExecutorContext, body string, out emit) {
	call := a2a.NewDataPart(ToolCall(body))
	call.SetMeta("type", "function_call")
	resp := a2a.NewDataPart(ToolResponse(body))
	resp.SetMeta("type", "function_response")
	if out(artifact(ec, ToolCallArtifact, false, true, call)) &&
		out(artifact(ec, ToolResponseArtifact, false, true, resp)) &&
		out(artifact(ec, TextArtifact, false, true, a2a.NewTextPart(ToolText(body)))) {
		out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
	}
}

func (e *executor) file(ec *a2asrv.ExecutorContext, body string, out emit) {
	raw := a2a.NewRawPart(FileBytes(body))
	raw.Filename, raw.MediaType = FileName, FileMIME
	if out(artifact(ec, FileBytesArtifact, false, true, raw)) &&
		out(artifact(ec, FileURLArtifact, false, true, a2a.NewFileURLPart(a2a.URL(FileURL(body)), FileURLMIME))) {
		out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
	}
}

// artifactMeta sends "artifact-meta:"'s artifacts: metadata on the
// artifacts and on each of their parts.
func (e *executor) artifactMeta(ec *a2asrv.ExecutorContext, body string, out emit) {
	chunks := MetaChunks(body)
	for i, c := range chunks {
		p := a2a.NewTextPart(c)
		p.Metadata = PartMetadata(body)
		ev := artifact(ec, MetaTextArtifact, i > 0, i == len(chunks)-1, p)
		if i == 0 { // the artifact's name and metadata come with its first chunk
			ev.Artifact.Name, ev.Artifact.Metadata = MetaArtifactName, ArtifactMetadata(body)
		}
		if !out(ev) {
			return
		}
	}
	d := a2a.NewDataPart(StreamData())
	d.Metadata = PartMetadata(body)
	ev := artifact(ec, MetaDataArtifact, false, true, d)
	ev.Artifact.Metadata = ArtifactMetadata(body)
	if out(ev) {
		out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
	}
}

// auth asks for auth and keeps the execution waiting, as a2a-go/v2 (and
// @a2a-js/sdk) model auth-required: the state is not final, the stream
// stays open and the agent resumes the same execution once credentials
// arrive. Here they arrive as the next message naming the task, which the
// request handler hands over (handler.resume).
func (e *executor) auth(ctx context.Context, ec *a2asrv.ExecutorContext, out emit) {
	p := e.s.park(ec.TaskID)
	defer e.s.unpark(p)
	if !out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, agentMessage(ec, "auth", AuthPrompt))) {
		return
	}
	var msg *a2a.Message
	select {
	case msg = <-p.answer:
	case <-ctx.Done():
		return
	case <-e.s.closing:
		out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentMessage(ec, "closed", "server closed")))
		return
	}
	text := firstText(msg)
	e.s.recordExecution(Execution{
		Scenario: Authed, TaskID: ec.TaskID, ContextID: ec.ContextID, Message: msg,
		History: []*a2a.Message{ec.Message, agentMessage(ec, "auth", AuthPrompt)}, Continued: true,
	})
	task := a2a.NewSubmittedTask(ec, ec.Message)
	task.History = append(task.History, agentMessage(ec, "auth", AuthPrompt), msg)
	task.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
	if out(task) && out(artifact(ec, ReplyArtifact, false, true, a2a.NewTextPart(AuthReply(text)))) {
		out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
	}
}

// slow sends a chunk every SlowInterval until it is canceled (its context
// ends), the server closes, or SlowChunks were sent.
func (e *executor) slow(ctx context.Context, ec *a2asrv.ExecutorContext, out emit) {
	tick := time.NewTicker(e.s.opts.SlowInterval)
	defer tick.Stop()
	for i := 1; i <= e.s.opts.SlowChunks; i++ {
		if !out(artifact(ec, SlowArtifact, i > 1, false, a2a.NewTextPart(SlowChunk(i)))) {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		case <-e.s.closing:
			out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentMessage(ec, "closed", "server closed")))
			return
		}
	}
	out(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
}

func artifact(ec *a2asrv.ExecutorContext, id a2a.ArtifactID, appendTo, last bool, parts ...*a2a.Part) *a2a.TaskArtifactUpdateEvent {
	ev := a2a.NewArtifactUpdateEvent(ec, id, parts...)
	ev.Append, ev.LastChunk = appendTo, last
	return ev
}

// agentMessage is an agent message of the task, its id the task's and
// label (stable, so that histories compare).
func agentMessage(ec *a2asrv.ExecutorContext, label, text string) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	m.ID = string(ec.TaskID) + "/" + label
	return m
}

func echoTask(ec *a2asrv.ExecutorContext, text string) *a2a.Task {
	t := a2a.NewSubmittedTask(ec, ec.Message)
	t.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
	t.Artifacts = []*a2a.Artifact{{ID: EchoArtifact, Parts: a2a.ContentParts{a2a.NewTextPart(EchoText(text))}}}
	return t
}

func historyOf(t *a2a.Task) []*a2a.Message {
	if t == nil {
		return nil
	}
	return append([]*a2a.Message(nil), t.History...)
}

package tck

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Pool is the pool name of the TCK scenario agent.
const Pool = "tck"

// LongWait is how long the long-running scenario (test-resubscribe-message-id)
// works before it completes: twice the suite's streaming timeout (2 s in
// its generated SUT agents, codegen's _STREAMING_TIMEOUT_S).
const LongWait = 4 * time.Second

// Scenario prefixes (the suite's scenarios/*.feature).
const (
	CompleteTask           = "tck-complete-task"
	ArtifactText           = "tck-artifact-text"
	ArtifactFile           = "tck-artifact-file"
	ArtifactFileURL        = "tck-artifact-file-url"
	ArtifactData           = "tck-artifact-data"
	MessageResponse        = "tck-message-response"
	InputRequired          = "tck-input-required"
	RejectTask             = "tck-reject-task"
	Stream001              = "tck-stream-001"
	Stream002              = "tck-stream-002"
	Stream003              = "tck-stream-003"
	StreamOrdering001      = "tck-stream-ordering-001"
	StreamArtifactText     = "tck-stream-artifact-text"
	StreamArtifactFile     = "tck-stream-artifact-file"
	StreamArtifactChunked  = "tck-stream-artifact-chunked"
	ResubscribeLongRunning = "test-resubscribe-message-id"
)

// File scenarios' content.
const (
	FileName  = "output.txt"
	FileMIME  = "text/plain"
	FileURL   = "https://example.com/output.txt"
	FileBytes = "tck"
)

// step is one event of a scenario: a non-final frame, or the final one.
type step struct {
	kind, status string
	body         any
	final        bool
	wait         time.Duration // before the frame
}

// scenarios maps each prefix to its steps, given the id of the request's
// artifact.
var scenarios = map[string]func(id string) []step{
	CompleteTask: func(string) []step { return []step{status("completed", "Hello from TCK", true)} },
	ArtifactText: func(id string) []step {
		return []step{artifact(id, "", false, true, textPart("Generated text content")), status("completed", "", true)}
	},
	ArtifactFile: func(id string) []step {
		return []step{artifact(id, FileName, false, true, fileBytesPart()), status("completed", "", true)}
	},
	ArtifactFileURL: func(id string) []step {
		return []step{artifact(id, FileName, false, true, fileURLPart()), status("completed", "", true)}
	},
	ArtifactData: func(id string) []step {
		data := map[string]any{"kind": "data", "data": map[string]any{"key": "value", "count": 42}}
		return []step{artifact(id, "", false, true, data), status("completed", "", true)}
	},
	MessageResponse: func(string) []step {
		return []step{{kind: e2a.KindA2AStreamEvent, status: e2a.StatusSucceeded, body: e2a.ReplyBody("Direct message response"), final: true}}
	},
	InputRequired: func(string) []step {
		return []step{{kind: e2a.KindA2AStreamEvent, status: e2a.StatusSucceeded, body: e2a.InterruptBody(e2a.StateInputRequired, ""), final: true}}
	},
	RejectTask: func(string) []step { return []step{status("rejected", "rejected", true)} },
	Stream001:  streamText("Stream hello from TCK"),
	Stream002:  func(string) []step { return []step{status("completed", "", true)} },
	Stream003:  streamText("Stream task lifecycle"),

	StreamOrdering001:  streamText("Ordered output"),
	StreamArtifactText: streamText("Streamed text content"),
	StreamArtifactFile: func(id string) []step {
		return []step{status("working", "", false), artifact(id, FileName, false, true, fileBytesPart()), status("completed", "", true)}
	},
	StreamArtifactChunked: func(id string) []step {
		return []step{status("working", "", false), artifact(id, "", false, false, textPart("chunk-1 ")),
			artifact(id, "", true, true, textPart("chunk-2")), status("completed", "", true)}
	},
	ResubscribeLongRunning: func(string) []step {
		done := status("completed", "", true)
		done.wait = LongWait
		return []step{status("working", "", false), done}
	},
}

// prefixes are the scenario prefixes, longest first (tck-artifact-file-url
// before tck-artifact-file).
var prefixes = func() []string {
	out := make([]string, 0, len(scenarios))
	for p := range scenarios {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}()

// Scenario returns the scenario prefix that messageID starts with (the
// longest), "" when none does.
func Scenario(messageID string) string {
	for _, p := range prefixes {
		if strings.HasPrefix(messageID, p) {
			return p
		}
	}
	return ""
}

// Agent is the TCK scenario agent. It is resumable.
type Agent struct {
	wait time.Duration
}

// Option configures New.
type Option func(*Agent) error

// WithLongWait sets how long the long-running scenario works (default
// LongWait); d must be positive, else ErrInvalidOption.
func WithLongWait(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0, func(a *Agent) { a.wait = d }, "long wait %v is not positive", d)
}

// New returns the TCK scenario agent.
func New(opts ...Option) (*Agent, error) {
	a := &Agent{wait: LongWait}
	if err := option.Apply(ErrInvalidOption, a, opts); err != nil {
		return nil, err
	}
	return a, nil
}

var _ agent.Handler = (*Agent)(nil)

// Resumable reports that the agent resumes after the frames already
// written (its frames are a pure function of the request).
func (*Agent) Resumable() bool { return true }

// Serve writes the frames of the scenario the request's message id names,
// skipping those already written (w.ResumeAfter).
func (a *Agent) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	steps := stepsOf(env)
	resume := w.ResumeAfter()
	for i, s := range steps {
		if int64(i) <= resume {
			continue
		}
		if s.wait > 0 {
			if err := sleepctx.SleepCause(ctx, a.wait); err != nil {
				return err
			}
		}
		if err := w.Write(s.kind, s.status, s.body, s.final); err != nil {
			return err
		}
	}
	return nil
}

// stepsOf returns the frames the agent writes for env, in order (the
// last one final).
func stepsOf(env *e2a.Envelope) []step {
	id := "artifact-" + env.RequestID
	if f := scenarios[Scenario(env.MessageID)]; f != nil {
		return f(id)
	}
	return []step{status("completed", "Unhandled messageId prefix: "+env.MessageID, true)}
}

// status is an A2A status-update event in state (v0.3 names) with the
// agent's text ("" for none), the final frame when final.
func status(state, text string, final bool) step {
	st := map[string]any{"state": state}
	if text != "" {
		st["message"] = map[string]any{"kind": "message", "role": "agent", "parts": []map[string]any{textPart(text)}}
	}
	s := step{kind: e2a.KindA2AStreamEvent, status: e2a.StatusInProgress, final: final,
		body: e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate, Payload: map[string]any{"kind": "status-update", "status": st, "final": final}}}
	if final {
		s.status = e2a.StatusSucceeded
	}
	return s
}

// artifact is an A2A artifact-update event of artifact id with one part
// (name "" for none), appended to the artifact's earlier parts when
// appendTo, its last chunk when last.
func artifact(id, name string, appendTo, last bool, part map[string]any) step {
	art := map[string]any{"artifactId": id, "parts": []map[string]any{part}}
	if name != "" {
		art["name"] = name
	}
	return step{kind: e2a.KindA2AStreamEvent, status: e2a.StatusInProgress, body: e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate,
		Payload: map[string]any{"kind": "artifact-update", "artifact": art, "append": appendTo, "lastChunk": last}}}
}

func textPart(text string) map[string]any { return map[string]any{"kind": "text", "text": text} }

func fileBytesPart() map[string]any {
	return map[string]any{"kind": "file", "file": map[string]any{"name": FileName, "mimeType": FileMIME,
		"bytes": base64.StdEncoding.EncodeToString([]byte(FileBytes))}}
}

func fileURLPart() map[string]any {
	return map[string]any{"kind": "file", "file": map[string]any{"name": FileName, "mimeType": FileMIME, "uri": FileURL}}
}

// streamText is the streaming scenarios' shape: working, one text
// artifact, completed.
func streamText(text string) func(id string) []step {
	return func(id string) []step {
		return []step{status("working", "", false), artifact(id, "", false, true, textPart(text)), status("completed", "", true)}
	}
}

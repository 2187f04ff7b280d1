package a2aupstream

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// The scenarios, chosen by the prefix of the first text part of the
// message that starts a task ("stream: hello" → Stream with body
// "hello"); a message naming a task waiting for input is its answer.
const (
	Stream  = "stream"
	Tool    = "tool"
	Ask     = "ask"
	Answer  = "answer" // the message that answers an ask: task
	Auth    = "auth"
	Authed  = "authorized" // the message that answers an auth: task
	Fail    = "fail"
	Slow    = "slow"
	Message = "message"
	File    = "file"
	Reject  = "reject"
	// AgentCancel: the agent ends its task canceled on its own (no
	// CancelTask asked for it).
	AgentCancel  = "agent-cancel"
	ArtifactMeta = "artifact-meta"
	// Late: the agent works Options.SlowInterval before its first event
	// (a stream on the Python wire holds its headers meanwhile), then
	// answers as Stream (a continuation of a task as Answer).
	Late = "late"
	// Big: one text artifact of as many bytes as the body says ("big:
	// 5242880": 5 MiB of 'x'), in one event, then completed: an answer
	// larger than a transport's bound on one message.
	Big  = "big"
	Echo = "echo" // anything else
)

var scenarios = []string{Stream, Tool, Ask, Auth, Fail, Slow, Late, Message, File, Reject, AgentCancel, ArtifactMeta, Big}

// Scenario splits a message text into its scenario and body: "stream:
// hi" → (Stream, "hi"); a text with no known prefix → (Echo, text).
func Scenario(text string) (name, body string) {
	for _, s := range scenarios {
		if rest, ok := strings.CutPrefix(text, s+":"); ok {
			return s, strings.TrimSpace(rest)
		}
	}
	return Echo, text
}

// Artifact ids, fixed so that tests can name them.
const (
	ThoughtArtifact      a2a.ArtifactID = "thought"
	TextArtifact         a2a.ArtifactID = "text"
	DataArtifact         a2a.ArtifactID = "data"
	ToolCallArtifact     a2a.ArtifactID = "tool-call"
	ToolResponseArtifact a2a.ArtifactID = "tool-response"
	AskArtifact          a2a.ArtifactID = "ask"
	ReplyArtifact        a2a.ArtifactID = "reply"
	SlowArtifact         a2a.ArtifactID = "slow"
	FileBytesArtifact    a2a.ArtifactID = "file-bytes"
	FileURLArtifact      a2a.ArtifactID = "file-url"
	EchoArtifact         a2a.ArtifactID = "echo"
	MetaTextArtifact     a2a.ArtifactID = "meta-text"
	MetaDataArtifact     a2a.ArtifactID = "meta-data"
)

// StreamChunks is the text "stream:" sends for body, chunk by chunk (one
// artifact, appended, the last with lastChunk).
func StreamChunks(body string) []string {
	var out []string
	for _, c := range strings.SplitAfter("Streaming "+body+" in chunks.", " ") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// StreamText is StreamChunks joined.
func StreamText(body string) string { return strings.Join(StreamChunks(body), "") }

// Thought is the reasoning "stream:" and "tool:" send first: a TextPart
// with metadata thought=true (the trpc A2A interaction spec's mark of
// reasoning; a2a-go/v2 has no convention of its own).
func Thought(body string) string { return "Thinking about " + body }

// StreamData is the DataPart "stream:" sends as its own artifact.
func StreamData() map[string]any { return map[string]any{"k": "v"} }

// ToolCall and ToolResponse are the DataParts "tool:" sends (trpc spec:
// part metadata type function_call / function_response; args and
// response as JSON strings), then ToolText as text.
func ToolCall(body string) map[string]any {
	args, _ := json.Marshal(map[string]string{"query": body})
	return map[string]any{"id": "call-1", "type": "function", "name": "lookup", "args": string(args)}
}

// ToolResponse: see ToolCall.
func ToolResponse(body string) map[string]any {
	resp, _ := json.Marshal(map[string]string{"result": "found " + body})
	return map[string]any{"id": "call-1", "name": "lookup", "response": string(resp)}
}

// ToolText: see ToolCall.
func ToolText(body string) string { return "Looked up " + body + "." }

// The "ask:" exchange: AskChunk is streamed, then the task waits in
// input-required with AskQuestion; the answer completes it with
// AskReply(answer).
const (
	AskChunk    = "One question first."
	AskQuestion = "What is your name?"
)

// AskReply: see AskChunk.
func AskReply(answer string) string { return "Hello, " + answer }

// AuthPrompt is the agent message of "auth:"'s auth-required status; the
// next message on the task completes it with AuthReply(its text).
const AuthPrompt = "Sign in to continue."

// AuthReply: see AuthPrompt.
func AuthReply(text string) string { return "Authorized: " + text }

// FailText is the agent message of "fail:"'s failed status.
func FailText(body string) string { return "Failed: " + body }

// RejectText is the agent message of "reject:"'s rejected status.
func RejectText(body string) string { return "Rejected: " + body }

// AgentCancelText is the agent message of "agent-cancel:"'s canceled
// status.
func AgentCancelText(body string) string { return "Canceled by the agent: " + body }

// The artifacts "artifact-meta:" sends: a text artifact named
// MetaArtifactName with ArtifactMetadata (both on its first event), its
// text MetaChunks in two events (the second appended), each part with
// PartMetadata; then a data
// artifact {"k":"v"} with ArtifactMetadata and PartMetadata too.
const MetaArtifactName = "notes"

// MetaChunks: see MetaArtifactName.
func MetaChunks(body string) []string { return []string{"Notes on " + body + ", ", "in two parts."} }

// MetaText is MetaChunks joined.
func MetaText(body string) string { return strings.Join(MetaChunks(body), "") }

// ArtifactMetadata: see MetaArtifactName.
func ArtifactMetadata(body string) map[string]any {
	return map[string]any{"source": body, "labels": []any{"a", "b"}}
}

// PartMetadata: see MetaArtifactName.
func PartMetadata(body string) map[string]any { return map[string]any{"lang": "en", "of": body} }

// MessageText is the text of "message:"'s direct Message answer.
func MessageText(body string) string { return "Direct answer: " + body }

// The files "file:" sends: one artifact with the bytes, one with the URL.
const (
	FileName     = "hello.txt"
	FileMIME     = "text/plain"
	FileURLMIME  = "image/png"
	CanceledText = "Canceled."
)

// FileBytes: see FileName.
func FileBytes(body string) []byte { return []byte("File for " + body) }

// FileURL: see FileName.
func FileURL(body string) string {
	return "https://files.example.com/" + url.PathEscape(body) + ".png"
}

// EchoText is the single artifact of the default scenario.
func EchoText(text string) string { return "Echo: " + text }

// SlowChunk is "slow:"'s i-th chunk (from 1).
func SlowChunk(i int) string { return fmt.Sprintf("tick %d ", i) }

// TextOf joins the text parts of parts (thoughts included).
func TextOf(parts []*a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p != nil {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

func firstText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			return string(t)
		}
	}
	return ""
}

package a2e

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Wire constants (a2e-message-protocol.md).
const (
	Version   = "1.0"
	EventType = "invoke/event"
	ErrorType = "error"
)

// Event kinds of invoke/event.
const (
	KindProgress = "progress"
	KindArtifact = "artifact"
	KindLog      = "log"
	KindStatus   = "status"
)

// now is the clock of the values not taken from frames (the base fields of
// the front door's own lines, the renderer's end-of-stream errors); tests
// fix it.
var now = time.Now

// newID makes the id of a message not taken from a frame (the front
// door's own lines, heartbeats, the renderer's end-of-stream errors): a
// UUIDv7 without dashes, new for every message (A2EMessage.id is
// generated per message), never derived from the client's req_id, which
// calls may share. Tests fix it.
var newID = func() string { return strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "") }

// Message is an A2E NDJSON message: the base fields of A2EMessage and the
// members of invoke/event, error and responses.
type Message struct {
	A2E     string  `json:"a2e"`
	ID      string  `json:"id"`
	Type    string  `json:"type"`
	Version string  `json:"version"`
	TS      float64 `json:"ts"`
	ReqID   string  `json:"req_id,omitempty"`

	// invoke/event
	Kind string         `json:"kind,omitempty"`
	Data map[string]any `json:"data,omitempty"`
	Seq  *int64         `json:"seq,omitempty"`

	// responses
	Result any `json:"result,omitempty"`

	// error
	Code           string         `json:"code,omitempty"`
	Message        string         `json:"message,omitempty"`
	Detail         map[string]any `json:"detail,omitempty"`
	Retryable      *bool          `json:"retryable,omitempty"`
	CapabilityName string         `json:"capability_name,omitempty"`
}

// MarshalJSON writes an error message with all the members of A2EError
// (a2e-message-protocol.md, Error Handling): detail is {} when nil, and
// retryable false when unset. Other types omit the error members.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	if m.Type != ErrorType {
		return json.Marshal(plain(m))
	}
	d := m.Detail
	if d == nil {
		d = map[string]any{}
	}
	retry := m.Retryable != nil && *m.Retryable
	return json.Marshal(struct {
		plain
		Code           string         `json:"code"`
		Message        string         `json:"message"`
		Detail         map[string]any `json:"detail"`
		Retryable      bool           `json:"retryable"`
		CapabilityName string         `json:"capability_name"`
	}{plain(m), m.Code, m.Message, d, retry, m.CapabilityName})
}

// NewMessage returns a message of type typ answering reqID, with a new id
// (a UUIDv7 without dashes) and the time now.
func NewMessage(typ, reqID string) Message {
	t := now()
	return Message{A2E: Version, Version: Version, ID: newID(), Type: typ, TS: float64(t.UnixMicro()) / 1e6, ReqID: reqID}
}

// NewError returns an error line answering reqID ("" when the message had
// no readable id).
func NewError(reqID, code, message string, retryable bool, detail map[string]any) Message {
	m := NewMessage(ErrorType, reqID)
	m.Code, m.Message, m.Detail, m.Retryable = code, message, detail, &retryable
	return m
}

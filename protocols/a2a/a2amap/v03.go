package a2amap

import (
	"fmt"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// The A2A v0.3 edge: the mapping builds A2A v1.0 values (a2a-go/v2's);
// A2A v0.3's answers and the AgentVault profile convert them here, once,
// with the SDK's compatibility layer (a2acompat/a2av0), which writes the
// bytes v0.3's mapping wrote (TestV03RoundTrip). What v1.0 has not, v0.3's
// final flag of a status-update, the caller gives ([Mapper.Final]).

// V03Event is ev in A2A v0.3; final is a status-update's final flag.
func V03Event(ev a2a.Event, final bool) (legacy.Event, error) {
	if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
		old := a2av0.FromV1TaskStatusUpdateEvent(su)
		old.Final = final
		return old, nil
	}
	old, err := a2av0.FromV1Event(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	return old, nil
}

// V03Task is t in A2A v0.3 (nil for nil).
func V03Task(t *a2a.Task) *legacy.Task { return a2av0.FromV1Task(t) }

// V03Result is message/send's result r (a Message or a Task) in A2A v0.3.
func V03Result(r a2a.SendMessageResult) (legacy.SendMessageResult, error) {
	switch v := r.(type) {
	case *a2a.Message:
		return a2av0.FromV1Message(v), nil
	case *a2a.Task:
		return a2av0.FromV1Task(v), nil
	}
	return nil, fmt.Errorf("%w: A2A result %T", ErrInvalidFrame, r)
}

package acptest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

var _ acp.Client = (*Recorder)(nil)

// Recorder is an ACP client (acp.Client) that records the session updates
// it gets; every other client method is refused.
type Recorder struct {
	mu      sync.Mutex
	updates map[acp.SessionId][]acp.SessionUpdate
	seen    chan acp.SessionId
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{updates: map[acp.SessionId][]acp.SessionUpdate{}, seen: make(chan acp.SessionId, 1024)}
}

func (c *Recorder) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.updates[n.SessionId] = append(c.updates[n.SessionId], n.Update)
	c.mu.Unlock()
	select {
	case c.seen <- n.SessionId:
	default:
	}
	return nil
}

// Take returns and forgets the updates of session id.
func (c *Recorder) Take(id acp.SessionId) []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.updates[id]
	delete(c.updates, id)
	return u
}

// Forget drops the record of updates seen so far (call it before the
// prompt whose first update WaitUpdate should wait for).
func (c *Recorder) Forget() {
	for {
		select {
		case <-c.seen:
		default:
			return
		}
	}
}

// WaitUpdate waits for an update of session id, up to 30 s (the bound
// only decides when a missing update fails the test: 10 s was once too
// short for a prompt queued behind a cancelled turn at a load of 10 on 2
// cores).
func (c *Recorder) WaitUpdate(t testing.TB, id acp.SessionId) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-c.seen:
			if s == id {
				return
			}
		case <-timeout:
			t.Fatalf("no update for session %s", id)
		}
	}
}

// CancelMidTurn forgets the updates so far, runs prompt (a session/prompt
// of session id) and, once an update of it arrived, sends session/cancel
// for the session on conn; the test fails unless the prompt ends with
// stopReason cancelled.
func (c *Recorder) CancelMidTurn(t testing.TB, ctx context.Context, conn interface {
	Cancel(context.Context, acp.CancelNotification) error
}, id acp.SessionId, prompt func() (acp.PromptResponse, error)) {
	t.Helper()
	type result struct {
		res acp.PromptResponse
		err error
	}
	rc := make(chan result, 1)
	c.Forget()
	go func() {
		res, err := prompt()
		rc <- result{res, err}
	}()
	c.WaitUpdate(t, id)
	if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
		t.Fatalf("cancelled prompt: %+v %v", r.res, r.err)
	}
}

// ErrNotSupported answers every client method but SessionUpdate.
var ErrNotSupported = errors.New("not supported by this test client")

func (c *Recorder) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, ErrNotSupported
}
func (c *Recorder) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, ErrNotSupported
}
func (c *Recorder) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{}, ErrNotSupported
}
func (c *Recorder) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, ErrNotSupported
}
func (c *Recorder) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, ErrNotSupported
}
func (c *Recorder) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, ErrNotSupported
}
func (c *Recorder) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, ErrNotSupported
}
func (c *Recorder) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, ErrNotSupported
}

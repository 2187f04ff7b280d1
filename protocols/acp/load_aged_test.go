package acp_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestLoadSessionWithAgedOutTurns: a session's turns age out of
// E2A_RESPONSES oldest first while their envelopes stay in E2A_REQUESTS.
// session/load failed whole ("the session history could not be read")
// once a turn's first frames were gone and its last one still stored. It
// replays what remains and says the history is not whole
// (_meta.e2a_history_expired, as A2A's tasks/get says it).
func TestLoadSessionWithAgedOutTurns(t *testing.T) {
	var turns atomic.Int32
	p, s := stdioPipeline(t, func(_ context.Context, _ *e2a.Envelope, w agent.Writer) error {
		name := "two"
		if turns.Add(1) == 1 {
			name = "one"
		}
		if err := w.Chunk(e2a.DeltaText, "first part of "+name+"; "); err != nil {
			return err
		}
		if err := w.Sync(); err != nil { // its own stored message
			return err
		}
		if err := w.Chunk(e2a.DeltaText, "last part of "+name); err != nil {
			return err
		}
		return w.Complete(nil)
	})
	for _, text := range []string{"one", "two"} {
		if _, said := s.Prompt(t, text); !strings.Contains(said, "last part of "+text) {
			t.Fatalf("prompt %q answered %q", text, said)
		}
	}
	res, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}})
	if err != nil || res.Meta[acp.MetaHistoryExpired] != nil {
		t.Fatalf("session/load with every frame stored: %+v %v", res, err)
	}
	s.Rec.Take(s.ID)
	// Turn one's frames and turn two's first part age out: E2A_RESPONSES
	// keeps turn two's last two messages (its last part, its final frame).
	st, err := p.JS.Stream(s.Ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(s.Ctx, jetstream.WithPurgeSequence(st.CachedInfo().State.LastSeq-1)); err != nil {
		t.Fatal(err)
	}
	res, err = s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/load with its first frames aged out: %v, want the session from what remains", err)
	}
	if res.Meta[acp.MetaHistoryExpired] != true {
		t.Errorf("session/load of an aged session: _meta %v, want e2a_history_expired: true", res.Meta)
	}
	said := acptest.Said(s.Rec.Take(s.ID))
	if !strings.Contains(said, "last part of two") || strings.Contains(said, "part of one") || strings.Contains(said, "first part") {
		t.Errorf("aged session's replay said %q, want turn two's remaining frame alone", said)
	}
}

package openai_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// storedMessages is the messages E2A_RESPONSES holds for request id.
func storedMessages(t *testing.T, nc *nats.Conn, id string) []streams.RawMsg {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := streams.DirectGetAll(ctx, nc, streams.ResponsesStream, subj, 0, 64)
	if err != nil && err != streams.ErrNoMessages {
		t.Fatal(err)
	}
	return msgs
}

// An answer the model server sends at once is stored as one message (its
// text with its final frame: agent.Hold while the next event is at hand),
// and one whose server pauses shows what came before the pause at once:
// its first delta is stored while the server waits.
func TestAnswerAtHandStoredAsOneMessage(t *testing.T) {
	srv := newModelServer(t)
	paused := make(chan struct{})
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		all := echoStream("chatcmpl-hold", body.Model, "echo: "+body.lastUser())
		if body.lastUser() == "at once" {
			_, _ = w.Write(all) // one write: the bridge reads it whole
			return true
		}
		// The role and the first half, then a pause the test ends.
		i := bytes.Index(all, []byte("\n\n")) + 2
		i += bytes.Index(all[i:], []byte("\n\n")) + 2
		_, _ = w.Write(all[:i])
		w.(http.Flusher).Flush()
		select {
		case <-paused:
		case <-r.Context().Done():
			return true
		}
		_, _ = w.Write(all[i:])
		return true
	})
	p := startBridge(t, srv, setup{})

	if got := read(t, ask(t, p, "", "hold-once", "at once", nil)); got.text != "echo: at once" {
		t.Fatalf("at once: %+v", got)
	}
	if n := len(storedMessages(t, p.NC, "hold-once")); n != 1 {
		t.Errorf("an answer sent at once stored as %d messages, want 1", n)
	}

	post(t, p, "", map[string]any{"request_id": "hold-pause", "method": "chat.send", "is_stream": true,
		"params": map[string]any{"content": "a pause"}})
	testkit.Eventually(t, 10*time.Second, "the delta before the pause stored while the server waits", func() bool {
		for _, m := range storedMessages(t, p.NC, "hold-pause") {
			for f := range bytes.SplitSeq(m.Data, []byte("\n")) {
				if r, err := e2a.ResponseFromJSON(f); err == nil && r.ResponseKind == e2a.KindChunk {
					return true
				}
			}
		}
		return false
	})
	close(paused)
	if got := read(t, frames(t, p, "", "hold-pause")); got.text != "echo: a pause" {
		t.Fatalf("a pause: %+v", got)
	}
}

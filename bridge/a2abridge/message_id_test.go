package a2abridge_test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// messageIDs is a transport in front of the agent that records the
// messageId of every message the bridge sends, whatever the agent (or the
// gateway before it) answers: a call refused with 503 never reaches the
// agent's handler, whose record (up.Server.Calls) would miss it.
type messageIDs struct {
	mu  sync.Mutex
	ids []string
}

var messageIDField = regexp.MustCompile(`"messageId":\s*"([^"]*)"`)

func (m *messageIDs) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		if id := messageIDField.FindSubmatch(b); id != nil {
			m.mu.Lock()
			m.ids = append(m.ids, string(id[1]))
			m.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (m *messageIDs) sent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ids...)
}

// TestRetriedMessageKeepsItsID: a call the bridge retries (here after a
// 503, before any frame) sends the same message again, with the same
// messageId, so that an agent (or a gateway) that received the first
// attempt can tell the retry for what it is; another request sends
// another messageId. Every attempt sent a fresh one (a2a.NewMessage).
func TestRetriedMessageKeepsItsID(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	p := pipetest.Start(t)
	spy := &messageIDs{}
	p.Pool("agent", newHandler(t, p, "agent", srv.BaseURL(), bridge.WithTransport(spy)))
	if err := srv.SetFault(up.Fault{Kind: up.FaultStatus, Status: http.StatusServiceUnavailable, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if fin := p.Ask(t, "agent", `{"params":{"text":"hello"}}`).Final(); fin == nil || fin.ResponseKind != e2a.KindComplete {
		t.Fatalf("the request ended %s; want it retried and completed", kindOf(fin))
	}
	ids := spy.sent()
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("messageIds sent %q; want one call refused and its retry, with the same messageId", ids)
	}
	if got := srv.LastMessage(); got == nil || got.ID != ids[0] {
		t.Errorf("the agent received message %+v; want messageId %q", got, ids[0])
	}
	if fin := p.Ask(t, "agent", `{"params":{"text":"hello again"}}`).Final(); fin == nil || fin.ResponseKind != e2a.KindComplete {
		t.Fatalf("the second request ended %s", kindOf(fin))
	}
	if all := spy.sent(); len(all) != 3 || all[2] == ids[0] {
		t.Errorf("messageIds sent %q; want the second request's own", all)
	}
}

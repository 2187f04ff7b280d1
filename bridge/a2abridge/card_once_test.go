package a2abridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestCardReadOnce: the agent's card is fetched once, whichever protocol
// version it is parsed as (it was fetched once per parser, v1.0 then
// v0.3): a v0.3 agent's card gives its JSON-RPC interface from one GET,
// and an agent that accepts the connection and never answers ends the
// start after one idle timeout, with one GET, not after two.
func TestCardReadOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var gets atomic.Int32
	v03, _ := json.Marshal(&legacy.AgentCard{
		Name: "v0.3 agent", Description: "d", Version: "1.0.0", URL: "http://127.0.0.1:1/rpc",
		PreferredTransport: legacy.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0",
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []legacy.AgentSkill{{ID: "s", Name: "s", Description: "s", Tags: []string{"t"}}},
	})
	cards := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(v03)
	}))
	defer cards.Close()
	c, err := bridge.NewClient(cards.URL)
	if err != nil {
		t.Fatal(err)
	}
	u, err := a2abridge.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if ifs := u.Card().SupportedInterfaces; len(ifs) != 1 || ifs[0].ProtocolVersion != "0.3.0" {
		for _, i := range ifs {
			t.Logf("interface %+v", *i)
		}
		t.Errorf("v0.3 card read with %d interfaces, want its JSON-RPC one at version 0.3.0", len(ifs))
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("v0.3 card: %d GETs, want 1", n)
	}

	var hung atomic.Int32
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer silent.Close()
	defer close(stop)
	c, err = bridge.NewClient(silent.URL, bridge.WithIdleTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a2abridge.New(ctx, c)
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeTimeout {
		t.Fatalf("a silent agent: %v, want %s", err, bridge.CodeTimeout)
	}
	// The GET timed out, so it was sent; its handler may run late on a
	// loaded machine: waited for, then counted.
	testkit.Eventually(t, 10*time.Second, "the silent agent's handler", func() bool { return hung.Load() >= 1 })
	if n := hung.Load(); n != 1 {
		t.Errorf("a silent agent: %d GETs, want 1", n)
	}
}

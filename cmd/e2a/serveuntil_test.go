package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
)

// chanListener is a net.Listener that accepts nothing until closed (a
// listener without network I/O, for a testing/synctest bubble).
type chanListener struct {
	once sync.Once
	done chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) { <-l.done; return nil, net.ErrClosed }
func (l *chanListener) Close() error              { l.once.Do(func() { close(l.done) }); return nil }
func (l *chanListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestServeUntilWaitsForEveryAgent: on shutdown serveUntil waits for every
// agent to end, for as long as they drain (agent.DefaultDrainTimeout) and
// a little more, and fails past that. Before, it returned after 10 s or
// the first agent, whichever came first: a pool still draining was cut
// off, its requests neither finished nor handed back, and the exit was 0.
func TestServeUntilWaitsForEveryAgent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release time.Duration // when the second agent ends (0: never)
		wantErr bool
	}{
		{"drained in time", agent.DefaultDrainTimeout, false},
		{"still running", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				agentDone := make(chan error, 2)
				go func() { <-ctx.Done(); agentDone <- nil }() // an idle pool, ended at once
				if tc.release > 0 {
					go func() { <-ctx.Done(); time.Sleep(tc.release); agentDone <- nil }()
				}
				result := make(chan error, 1)
				srv := &http.Server{Handler: http.NotFoundHandler()}
				go func() {
					result <- serveUntil(ctx, srv, &chanListener{done: make(chan struct{})}, slog.New(slog.DiscardHandler), agentDone, 2, agent.DefaultDrainTimeout, nil)
				}()
				synctest.Wait()
				cancel()
				time.Sleep(agent.DefaultDrainTimeout - time.Second)
				synctest.Wait()
				select {
				case err := <-result:
					t.Fatalf("serveUntil returned (%v) while an agent was still draining", err)
				default:
				}
				err := <-result
				if tc.wantErr != (err != nil) || (err != nil && !strings.Contains(err.Error(), "still running")) {
					t.Fatalf("serveUntil: %v, want an error: %v", err, tc.wantErr)
				}
			})
		})
	}
}

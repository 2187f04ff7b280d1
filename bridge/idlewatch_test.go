package bridge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdleWatch: a watch ends its context d after it began with
// ErrIdleTimeout (nothing sent), or d after Sent with ErrAwaitingAnswer
// (which is an ErrIdleTimeout too); Stop before then keeps the context
// (until End) and returns nil, again later too.
func TestIdleWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, w := WatchIdle(context.Background(), time.Second)
		<-ctx.Done()
		if c := context.Cause(ctx); c != ErrIdleTimeout || w.Stop() != ErrIdleTimeout {
			t.Errorf("not sent: cause %v, Stop %v; want ErrIdleTimeout", c, w.Stop())
		}
		w.End()

		start := time.Now()
		ctx, w = WatchIdle(context.Background(), time.Second)
		time.Sleep(700 * time.Millisecond)
		w.Sent()
		<-ctx.Done()
		c := context.Cause(ctx)
		if c != ErrAwaitingAnswer || !errors.Is(c, ErrIdleTimeout) || time.Since(start) != 1700*time.Millisecond {
			t.Errorf("sent at 0.7 s: cause %v after %v; want ErrAwaitingAnswer after 1.7 s", c, time.Since(start))
		}
		w.End()

		ctx, w = WatchIdle(context.Background(), time.Second)
		w.Sent()
		if err := w.Stop(); err != nil {
			t.Fatalf("Stop before the time: %v", err)
		}
		time.Sleep(5 * time.Second)
		if ctx.Err() != nil || w.Stop() != nil {
			t.Errorf("stopped watch: context %v, Stop %v; want alive, nil", ctx.Err(), w.Stop())
		}
		w.End()
		if ctx.Err() == nil {
			t.Error("End left the context alive")
		}
	})
}

// TestHeaderWaitSent: the client's calls tell a request sent and not
// answered (an agent that reads it and says nothing: ErrAwaitingAnswer)
// from one never sent (a transport that does not get it out:
// ErrIdleTimeout alone).
func TestHeaderWaitSent(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-stop // reads the request, never answers
	}))
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { close(stop) })
	c, err := NewClient(srv.URL, WithIdleTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, http.NoBody)
	if _, err := c.HTTP().Do(req); !errors.Is(err, ErrAwaitingAnswer) {
		t.Errorf("a request the agent read: %v, want ErrAwaitingAnswer", err)
	}
	held := WithTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done() // never writes the request
		return nil, r.Context().Err()
	}))
	c, err = NewClient(srv.URL, WithIdleTimeout(200*time.Millisecond), held)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL, http.NoBody)
	if _, err := c.HTTP().Do(req); !errors.Is(err, ErrIdleTimeout) || errors.Is(err, ErrAwaitingAnswer) {
		t.Errorf("a request never sent: %v, want ErrIdleTimeout only", err)
	}
}

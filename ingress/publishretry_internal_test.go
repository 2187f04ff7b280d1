package ingress

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestPublishRetryBounds: a publish no stream answers is tried again
// (jetstream's default attempts, its wait apart) within the timeout and
// then fails with jetstream.ErrNoStreamResponse; a timeout shorter than
// the wait between attempts ends after the first; a caller gone ends the
// waits between attempts.
func TestPublishRetryBounds(t *testing.T) {
	_, nc := natstest.RunServer(t)
	msg := func() *nats.Msg { return nats.NewMsg("no.stream.here") }

	start := time.Now()
	_, err := publishRetry(context.Background(), nc, msg(), 5*time.Second)
	took := time.Since(start)
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("no stream: %v, want jetstream.ErrNoStreamResponse", err)
	}
	if min := time.Duration(jetstream.DefaultPubRetryAttempts) * jetstream.DefaultPubRetryWait; took < min {
		t.Errorf("no stream: failed after %v, before its %d retries (%v apart)", took, jetstream.DefaultPubRetryAttempts, jetstream.DefaultPubRetryWait)
	}

	start = time.Now()
	if _, err = publishRetry(context.Background(), nc, msg(), jetstream.DefaultPubRetryWait/2); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("short timeout: %v", err)
	}
	if took := time.Since(start); took >= jetstream.DefaultPubRetryWait {
		t.Errorf("a timeout shorter than the retry wait: ended after %v, want after the first attempt", took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if _, err = publishRetry(ctx, nc, msg(), 5*time.Second); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("caller gone: %v", err)
	}
	if took := time.Since(start); took >= jetstream.DefaultPubRetryWait {
		t.Errorf("caller gone: ended after %v, want after the first attempt", took)
	}
}

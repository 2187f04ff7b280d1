package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/push"
)

// pushStoreOption is the ingress option that serves A2A's push config
// methods from the E2A_PUSH bucket, with the URL rules of the push stage
// (pushOptions: E2A_PUSH_ALLOW_HOSTS; dev adds the loopback hosts).
func pushStoreOption(ctx context.Context, nc *nats.Conn, cfg Config, dev bool) (ingress.Option, error) {
	_, opts, err := pushOptions(cfg, dev, nil, nil)
	if err != nil {
		return nil, err
	}
	st, err := push.NewStore(ctx, nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("push config store: %w", err)
	}
	return ingress.WithPushStore(st), nil
}

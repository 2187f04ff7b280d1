package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/push"
)

// pushStoreOptions are the ingress options that serve A2A's push config
// methods from the E2A_PUSH bucket, with the URL rules of the push stage
// (pushOptions: E2A_PUSH_ALLOW_HOSTS; dev adds the loopback hosts); none
// with E2A_PUSH=off, which neither opens nor creates the bucket: the cards
// then say pushNotifications false and the methods answer
// PushNotificationNotSupported.
func pushStoreOptions(ctx context.Context, nc *nats.Conn, cfg Config, dev bool) ([]ingress.Option, error) {
	pe, opts, err := pushOptions(cfg, dev, nil, nil)
	if err != nil {
		return nil, err
	}
	if pe.mode() == pushOff {
		return nil, nil
	}
	st, err := push.NewStore(ctx, nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("push config store: %w", err)
	}
	return []ingress.Option{ingress.WithPushStore(st)}, nil
}

// pushConsoleOptions show each task's push configs and their delivery
// state in the console (GET /console/api/tasks/{task}/push, for the
// task's owner); none with E2A_PUSH=off.
func pushConsoleOptions(ctx context.Context, nc *nats.Conn, cfg Config) ([]console.Option, error) {
	pe, opts, err := pushOptions(cfg, false, nil, nil)
	if err != nil {
		return nil, err
	}
	if pe.mode() == pushOff {
		return nil, nil
	}
	st, err := push.NewStore(ctx, nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("push config store: %w", err)
	}
	return []console.Option{console.WithPushView(func(ctx context.Context, principal, taskID string) ([]console.PushDelivery, error) {
		ds, err := st.Deliveries(ctx, principal, taskID)
		out := make([]console.PushDelivery, 0, len(ds))
		for _, d := range ds {
			out = append(out, console.PushDelivery(d))
		}
		return out, err
	})}, nil
}

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/push"
)

// openPushStore opens the E2A_PUSH bucket (creating it when missing) with
// the URL rules of the push stage (pushOptions: E2A_PUSH_ALLOW_HOSTS; dev
// adds the loopback hosts); nil with E2A_PUSH=off, which neither opens
// nor creates it.
func openPushStore(ctx context.Context, nc *nats.Conn, cfg Config, dev bool) (*push.Store, error) {
	pe, opts, err := pushOptions(cfg, dev, nil, nil)
	if err != nil || pe.mode() == pushOff {
		return nil, err
	}
	st, err := push.NewStore(ctx, nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("push config store: %w", err)
	}
	return st, nil
}

// checkHTTPConfig refuses, before anything starts (the embedded server,
// its streams, the listeners' work), what newHTTP and the push store would
// refuse once started: the auth configuration (E2A_AUTH_*, E2A_API_KEYS,
// …) and the push variables (E2A_PUSH*), each error naming its variable.
// It returns the header a client must add when every request needs a
// credential (for the banner's example), "" when none is needed.
func checkHTTPConfig(cfg Config, dev bool) (string, error) {
	auth, err := ingress.LoadAuth(os.Getenv)
	if err != nil {
		return "", err
	}
	pe, opts, err := pushOptions(cfg, dev, nil, nil)
	if err != nil {
		return "", err
	}
	if pe.mode() != pushOff {
		if err := push.CheckOptions(opts...); err != nil {
			return "", fmt.Errorf("config: %w", err)
		}
	}
	return credentialHeader(auth), nil
}

// credentialHeader is the curl option of the credential every request of
// auth needs, with a placeholder: "" when anonymous requests are served.
func credentialHeader(auth *ingress.Auth) string {
	switch {
	case auth.Enabled(ingress.SchemeNone):
		return ""
	case auth.Enabled(ingress.SchemeAPIKey):
		return " -H '" + ingress.HeaderAPIKey + ": <your key>'"
	default:
		return " -H 'Authorization: Bearer <your token>'"
	}
}

// pushStoreOptions are the ingress options that serve A2A's push config
// methods from the push store; none with E2A_PUSH=off: the cards then say
// pushNotifications false and the methods answer
// PushNotificationNotSupported.
func pushStoreOptions(ctx context.Context, nc *nats.Conn, cfg Config, dev bool) ([]ingress.Option, error) {
	st, err := openPushStore(ctx, nc, cfg, dev)
	if err != nil || st == nil {
		return nil, err
	}
	return []ingress.Option{ingress.WithPushStore(st)}, nil
}

// pushConsoleOptions show each task's push configs and their delivery
// state in the console (GET /console/api/tasks/{task}/push, for the
// task's owner); none with E2A_PUSH=off.
func pushConsoleOptions(ctx context.Context, nc *nats.Conn, cfg Config) ([]console.Option, error) {
	st, err := openPushStore(ctx, nc, cfg, false)
	if err != nil || st == nil {
		return nil, err
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

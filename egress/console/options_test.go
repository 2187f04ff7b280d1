package console_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestOptionsRefuseBadValues checks that every option refuses its bad
// values with ErrInvalidOption before New provisions anything, and that
// good values of each are accepted. WithoutIndexer has no argument.
func TestOptionsRefuseBadValues(t *testing.T) {
	_, nc := natstest.RunServer(t, natstest.WithoutStreams())
	badStreams := natstest.Config()
	badStreams.Replicas = 0
	auth := func(*http.Request) (tenant.Principal, int, error) { return tenant.Principal{}, 0, nil }
	bad := map[string]console.Option{
		"nil auth":             console.WithAuth(nil),
		"nil challenge":        console.WithChallenge(nil),
		"nil registerer":       console.WithRegisterer(nil),
		"nil gatherer":         console.WithGatherer(nil),
		"nil logger":           console.WithLogger(nil),
		"invalid streams":      console.WithStreamsConfig(badStreams),
		"zero index TTL":       console.WithIndexTTL(0),
		"negative index TTL":   console.WithIndexTTL(-1),
		"nil demo handler":     console.WithDemo(nil, "demo"),
		"invalid demo pool":    console.WithDemo(http.NotFoundHandler(), "no pool"),
		"empty demo pool":      console.WithDemo(http.NotFoundHandler(), ""),
		"zero scan budget":     console.WithScanBudget(0),
		"negative scan budget": console.WithScanBudget(-5),
		"nil option":           nil,
	}
	for name, o := range bad {
		t.Run(name, func(t *testing.T) {
			c, err := console.New(context.Background(), nc, nil, o)
			if !errors.Is(err, console.ErrInvalidOption) || c != nil {
				t.Fatalf("New: %v, want ErrInvalidOption", err)
			}
		})
	}
	reg := prometheus.NewRegistry()
	good := []console.Option{console.WithAuth(auth), console.WithRegisterer(reg), console.WithGatherer(reg),
		console.WithLogger(slog.Default()), console.WithStreamsConfig(natstest.Config()), console.WithIndexTTL(3600e9),
		console.WithDemo(http.NotFoundHandler(), "demo"), console.WithScanBudget(1), console.WithoutIndexer()}
	for i, o := range good {
		c, err := console.New(context.Background(), nc, nil, o, console.WithoutIndexer())
		if err != nil {
			t.Fatalf("good option %d: %v", i, err)
		}
		c.Close()
	}
}

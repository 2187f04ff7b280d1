package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
)

// newUpstream builds the A2A and HTTP upstreams.
func newUpstream(ctx context.Context, client *bridge.Client, conv *bridge.Conversations, pool string, u UpstreamConfig, info *bridge.PoolInfo, log *slog.Logger) (bridge.Upstream, error) {
	switch u.Kind {
	case upstreamHTTP:
		if info.Description == "" {
			info.Description = "An HTTP agent behind the E2A Pipeline: durable, resumable, on every A2A binding, ACP and E2A."
		}
		return httpagent.New(client, httpagent.WithLogger(log))
	}
	return nil, fmt.Errorf("upstream kind %s: not available in this build", u.Kind)
}

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// newUpstream builds the A2A and HTTP upstreams.
func newUpstream(ctx context.Context, client *bridge.Client, conv *bridge.Conversations, pool string, u UpstreamConfig, info *bridge.PoolInfo, log *slog.Logger) (bridge.Upstream, error) {
	return nil, fmt.Errorf("upstream kind %s: not available in this build", u.Kind)
}

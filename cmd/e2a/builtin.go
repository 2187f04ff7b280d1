package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/agent/tck"
	"github.com/e2a-pipeline/pipeline/bridge"
)

// devPool is a built-in agent pool the development server serves.
type devPool struct {
	name string
	h    agent.Handler
	// info, when set, is the pool's info (its profile: streaming,
	// required extensions), published before its workers start.
	info *bridge.PoolInfo
	// what, when set, says what serves the pool in the start-up banner
	// (a bridge: its upstream); opts are its agent.Run options beyond
	// the process's.
	what string
	opts []agent.Option
}

// devPools are the built-in pools of `e2a dev`: the default pool
// (E2A_DEFAULT_POOL, the demo agent, or the TCK scenario agent when it is
// "tck" or "tck-basic") and the TCK scenario agent's pools "tck" and
// "tck-basic" (its second profile: no streaming, the TCK's extension
// required). E2A_DEFAULT_POOL=tck sends what the root A2A interfaces
// receive (JSON-RPC, HTTP+JSON, gRPC) to the TCK agent: the official A2A
// TCK runs against the root card; E2A_DEFAULT_POOL=tck-basic gives the
// root card that pool's profile.
func devPools(defaultPool string) ([]devPool, error) {
	t, err := tck.New()
	if err != nil {
		return nil, err
	}
	info := tck.BasicPoolInfo()
	full, basic := devPool{name: tck.Pool, h: t}, devPool{name: tck.BasicPool, h: t, info: &info}
	switch defaultPool {
	case tck.Pool:
		return []devPool{full, basic}, nil
	case tck.BasicPool:
		return []devPool{basic, full}, nil
	}
	return []devPool{{name: defaultPool, h: demo.New()}, full, basic}, nil
}

// devLayout is the pools of `e2a dev` and its default pool, with bridged
// (`e2a dev --pool NAME --a2a|--openai|--http URL`; nil: none): the bridged
// pool is the default one, first, and the demo agent serves "demo", unless
// E2A_DEFAULT_POOL names another pool (defaultSet), which then stays the
// default as without a bridge. A newcomer's `e2a dev --openai URL --model
// M` thus answers /v1/requests, /a2a and the root card's endpoints with
// the model.
func devLayout(defaultPool string, defaultSet bool, bridged *devPool) ([]devPool, string, error) {
	if bridged == nil {
		pools, err := devPools(defaultPool)
		return pools, defaultPool, err
	}
	if !defaultSet || defaultPool == bridged.name {
		pools, err := devPools(demo.Pool)
		return append([]devPool{*bridged}, pools...), bridged.name, err
	}
	pools, err := devPools(defaultPool)
	return append(pools, *bridged), defaultPool, err
}

// publishDevPools publishes the info of the pools that have one (in
// E2A_BRIDGE, as a bridge publishes its pool's), again at a third of
// the bucket's TTL until ctx ends.
func publishDevPools(ctx context.Context, js jetstream.JetStream, cfg Config, pools []devPool, log *slog.Logger) error {
	var conv *bridge.Conversations
	for _, p := range pools {
		if p.info == nil {
			continue
		}
		if conv == nil {
			var err error
			if conv, err = bridge.OpenConversations(ctx, js, cfg.StreamsConfig()); err != nil {
				return err
			}
		}
		if err := conv.PublishPool(ctx, *p.info); err != nil {
			return err
		}
		go poolCard{conv: conv, info: *p.info, ttl: cfg.TasksTTL, log: log}.run(ctx)
	}
	return nil
}

// poolsLine names the pools for the start-up banner: the default one
// first, each with what serves it.
func poolsLine(pools []devPool) string {
	var parts []string
	for i, p := range pools {
		what := "demo"
		if _, ok := p.h.(*tck.Agent); ok {
			what = "A2A TCK scenarios"
		}
		if p.what != "" {
			what = p.what
		}
		if p.info != nil && !p.info.Streaming {
			what += ", no streaming"
		}
		if p.info != nil && len(p.info.RequiredExtensions) > 0 {
			what += ", requires " + strings.Join(p.info.RequiredExtensions, " ")
		}
		if i == 0 {
			what += ", default"
		}
		parts = append(parts, fmt.Sprintf("%q (%s)", p.name, what))
	}
	return strings.Join(parts, ", ")
}

// demoPoolOf is the pool the demo agent serves among pools, for the
// console's demo form (its frames and delay are the demo agent's
// parameters; a bridged default pool would send them to its upstream),
// fallback when none does.
func demoPoolOf(pools []devPool, fallback string) string {
	for _, p := range pools {
		if _, ok := p.h.(demo.Agent); ok {
			return p.name
		}
	}
	return fallback
}

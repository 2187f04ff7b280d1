package main

import (
	"fmt"
	"strings"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/agent/tck"
)

// devPool is a built-in agent pool the development server serves.
type devPool struct {
	name string
	h    agent.Handler
}

// devPools are the built-in pools of `e2a dev`: the default pool
// (E2A_DEFAULT_POOL, the demo agent, or the TCK scenario agent when it is
// "tck") and the TCK scenario agent's pool "tck". E2A_DEFAULT_POOL=tck
// sends what the root A2A interfaces receive (JSON-RPC, HTTP+JSON, gRPC) to
// the TCK agent: the official A2A TCK runs against the root card.
func devPools(defaultPool string) ([]devPool, error) {
	t, err := tck.New()
	if err != nil {
		return nil, err
	}
	if defaultPool == tck.Pool {
		return []devPool{{tck.Pool, t}}, nil
	}
	return []devPool{{defaultPool, demo.New()}, {tck.Pool, t}}, nil
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
		if i == 0 {
			what += ", default"
		}
		parts = append(parts, fmt.Sprintf("%q (%s)", p.name, what))
	}
	return strings.Join(parts, ", ")
}

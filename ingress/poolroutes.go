package ingress

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// PoolsPath prefixes a pool's own endpoints. Every front door is served
// again under /pools/<pool>/ with its requests sent to that pool (as
// ?agent=<pool> would): /pools/<pool>/a2a/v1 (A2A v1.0 JSON-RPC and
// HTTP+JSON), /pools/<pool>/a2a (A2A v0.3, AgentVault), /pools/<pool>/acp,
// /pools/<pool>/v1/requests, /pools/<pool>/a2e, and the pool's own agent
// card at /pools/<pool>/.well-known/agent-card.json, whose interfaces point
// there. An A2A client given that card talks to the pool's agent without
// knowing about pools. The gRPC binding, which has no path to carry the
// pool, is listed with A2A v1.0's `tenant: <pool>` (pooltenant.go).
const PoolsPath = "/pools/"

type poolCtxKey struct{}

func poolFromContext(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(poolCtxKey{}).(string)
	return p, ok
}

// mountPools serves every route of mux again under /pools/<pool>/.
func (s *Server) mountPools(mux *http.ServeMux) {
	mux.HandleFunc(PoolsPath+"{pool}/", func(w http.ResponseWriter, r *http.Request) {
		pool := r.PathValue("pool")
		rest := strings.TrimPrefix(r.URL.Path, PoolsPath+pool)
		if subjects.ValidatePool(pool) != nil || strings.HasPrefix(rest, PoolsPath) || rest == "" {
			e2aproto.WriteError(w, http.StatusNotFound, "not_found", "no such pool endpoint", false)
			return
		}
		r2 := r.Clone(context.WithValue(r.Context(), poolCtxKey{}, pool))
		r2.URL.Path, r2.URL.RawPath = rest, ""
		q := r2.URL.Query()
		q.Set("agent", pool)
		r2.URL.RawQuery = q.Encode()
		r2.RequestURI = r2.URL.RequestURI()
		mux.ServeHTTP(w, r2)
	})
}

// handlePoolCard answers a pool's agent card: the pipeline's card with its
// interfaces under /pools/<pool>, named and described by what the pool's
// bridge published (an A2A upstream's own name, description, skills and
// input and output modes), or after the pool alone. A pool no worker ever
// served and no bridge published is 404.
func (s *Server) handlePoolCard(w http.ResponseWriter, r *http.Request, pool string) {
	card, ok := s.poolCard(r.Context(), s.baseURL(r), pool)
	if !ok {
		e2aproto.WriteError(w, http.StatusNotFound, "unknown_agent", "no agent pool named "+pool, false)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=60")
	s.writeCard(w, r, card)
}

// poolCard is the card handlePoolCard answers for the pipeline at base
// (ok false: no such pool), with the pool's profile (cardProfile).
func (s *Server) poolCard(ctx context.Context, base, pool string) (map[string]any, bool) {
	info, found, err := bridge.LookupPool(ctx, s.js, pool)
	if err != nil {
		s.opts.log.Warn("pool card: bridge pool info unreadable", "pool", pool, "err", err)
	}
	if !found {
		known := false
		if s.pools != nil {
			st, err := s.pools.state(ctx, pool)
			known = err == nil && st.known
		} else {
			names, _ := s.poolNames(ctx)
			known = slices.Contains(names, pool)
		}
		if !known {
			return nil, false
		}
		info = bridge.PoolInfo{Pool: pool}
	}
	base += PoolsPath + pool
	card := s.agentCard(base, s.grpcURL(base))
	poolGRPCTenant(card, pool)
	card["name"] = info.Name
	if info.Name == "" {
		card["name"] = "E2A Pipeline: " + pool
	}
	card["description"] = info.Description
	if info.Description == "" {
		card["description"] = "The agent pool " + pool + " behind the E2A Pipeline: durable, resumable, on every A2A binding, ACP and E2A."
	}
	if info.Version != "" {
		card["version"] = info.Version
	}
	if len(info.Skills) > 0 {
		card["skills"] = info.Skills
	} else {
		card["skills"] = []map[string]any{{"id": pool, "name": pool, "description": "Requests to the agent pool " + pool + ".", "tags": []string{"agent"}}}
	}
	if len(info.InputModes) > 0 {
		card["defaultInputModes"] = info.InputModes
	}
	if len(info.OutputModes) > 0 {
		card["defaultOutputModes"] = info.OutputModes
	}
	s.cardProfile(ctx, card, pool)
	return card, true
}

// PoolsExtension is the URI of the card extension listing the pipeline's
// agent pools and their cards.
const PoolsExtension = "https://e2a-pipeline.dev/extensions/pools/v1"

// listPools adds to the pipeline's card one skill per agent pool and the
// pools extension naming each pool's card URL.
func (s *Server) listPools(ctx context.Context, card map[string]any, base string) {
	names, err := s.poolNames(ctx)
	if err != nil || len(names) == 0 {
		return
	}
	skills, _ := card["skills"].([]any)
	var pools []map[string]any
	for _, n := range names {
		url := base + PoolsPath + n + "/.well-known/agent-card.json"
		pools = append(pools, map[string]any{"pool": n, "card": url})
		skills = append(skills, map[string]any{"id": "pool:" + n, "name": n,
			"description": "The agent pool " + n + "; its own card: " + url, "tags": []string{"pool"}})
	}
	card["skills"] = skills
	if caps, ok := card["capabilities"].(map[string]any); ok {
		exts, _ := caps["extensions"].([]any)
		caps["extensions"] = append(exts, map[string]any{"uri": PoolsExtension,
			"description": "The agent pools behind this pipeline, each an agent of its own", "params": map[string]any{"pools": pools}})
	}
}

// poolCache caches the pool names for the pipeline's card (a card read
// must not cost a JetStream API call each time).
type poolCache struct {
	mu    sync.Mutex
	names []string
	at    time.Time
}

const poolListTTL = 5 * time.Second

// poolNames lists the agent pools (durable consumers agent-<pool> on
// E2A_REQUESTS), sorted, cached for poolListTTL.
func (s *Server) poolNames(ctx context.Context) ([]string, error) {
	c := &s.poolList
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names != nil && time.Since(c.at) < poolListTTL {
		return c.names, nil
	}
	m, err := s.Pools(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	c.names, c.at = names, time.Now()
	return names, nil
}

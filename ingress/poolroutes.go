package ingress

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// PoolsPath prefixes a pool's own endpoints. Every front door is served
// again under /pools/<pool>/ with its requests sent to that pool (as
// ?agent=<pool> would; a ?agent= naming another pool is refused 400 by the
// gate): /pools/<pool>/a2a/v1 (A2A v1.0 JSON-RPC and
// HTTP+JSON), /pools/<pool>/a2a (A2A v0.3, AgentVault), /pools/<pool>/acp,
// /pools/<pool>/v1/requests, /pools/<pool>/a2e, and the pool's own agent
// card at /pools/<pool>/.well-known/agent-card.json, whose interfaces point
// there. An A2A client given that card talks to the pool's agent without
// knowing about pools. The gRPC binding, which has no path to carry the
// pool, is listed with A2A v1.0's `tenant: <pool>` (package protocols/a2av1 writes the card).
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
		// A query that is no URL-encoded form is left as sent, for the
		// door's gate to refuse whole (requestRefusal): its pairs read
		// and encoded again, the rest would have been dropped silently.
		// A ?agent= naming another pool is left too, for the gate to
		// refuse (requestRefusal: the path and the query disagree).
		if q, err := host.ReadQuery(r2.URL.RawQuery); err == nil && !namesOtherPool(q, pool) {
			q.Set("agent", pool)
			r2.URL.RawQuery = q.Encode()
		}
		r2.RequestURI = r2.URL.RequestURI()
		mux.ServeHTTP(w, r2)
	})
}

// namesOtherPool reports whether q's ?agent= names a pool other than the
// path's.
func namesOtherPool(q url.Values, pool string) bool {
	return slices.ContainsFunc(q["agent"], func(a string) bool { return a != pool })
}

// poolCardInfo is what a pool's card declares (ok false: no such pool): a
// card of the pipeline at base with its interfaces under /pools/<pool>,
// named and described by what the pool's bridge published (an A2A
// upstream's own name, description, skills and input and output modes),
// or after the pool alone, with the pool's profile. A pool no worker ever
// served and no bridge published has none (its card is 404).
func (s *Server) poolCardInfo(ctx context.Context, base, pool string) (host.CardInfo, bool) {
	if pool == normalizer.WorkflowPool {
		return host.CardInfo{}, false // no A2A agent (poolNames)
	}
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
			return host.CardInfo{}, false
		}
		info = bridge.PoolInfo{Pool: pool}
	}
	in := s.cardInfo(base + PoolsPath + pool)
	in.Pool = &host.CardPool{Name: pool, Title: info.Name, Description: info.Description, Version: info.Version,
		Skills: info.Skills, InputModes: info.InputModes, OutputModes: info.OutputModes}
	pr := cardProfile(s.poolProfile(ctx, pool))
	in.Profile = &pr
	return in, true
}

// PoolsExtension is the URI of the card extension listing the pipeline's
// agent pools and their cards (package protocols/a2av1's).
const PoolsExtension = a2av1.PoolsExtension

// poolCache caches the pool names for the pipeline's card (a card read
// must not cost a JetStream API call each time).
type poolCache struct {
	mu    sync.Mutex
	names []string
	at    time.Time
}

const poolListTTL = 5 * time.Second

// poolNames lists the agent pools (durable consumers agent-<pool> on
// E2A_REQUESTS), sorted, cached for poolListTTL. The workflow pool is not
// one of them: it runs A2E workflow executions only (the normalizer
// refuses any other message to it), so it is no agent an A2A client could
// be given, and has no card (poolCardInfo).
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
		if n != normalizer.WorkflowPool {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	c.names, c.at = names, time.Now()
	return names, nil
}

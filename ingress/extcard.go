package ingress

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// The extended agent card (A2A v1.0 §3.1.11, v0.3's authenticated
// extended card) and the pools' profiles.
//
// Every card declares the extended card (capabilities.extendedAgentCard;
// v0.3: supportsAuthenticatedExtendedCard) unless WithExtendedCard(false).
// GetExtendedAgentCard (JSON-RPC, HTTP+JSON GET /extendedAgentCard, gRPC;
// v0.3 agent/getAuthenticatedExtendedCard) needs an authenticated caller
// when authentication is configured: the anonymous caller of optional
// authentication is refused (UNAUTHENTICATED) before anything is read. The
// answer is the card of the interface called (the pipeline's, or a pool's
// under /pools/<pool>/) extended with what that caller may use: the
// principal extension (PrincipalExtension: its user id, identity origin,
// roles, rate limits and concurrent streams, its own and nobody else's),
// each pool's own skills as its bridge published them, and each pool's
// profile (streaming, required extensions) in the pools extension.

// extendedCardMembers declares the extended card in card (v0.3's JSON
// values): capabilities.extendedAgentCard, A2A v1.0's member, unless
// WithExtendedCard(false). v0.3's supportsAuthenticatedExtendedCard is
// set by agentCard only when authentication is configured
// (v03ExtendedCard).
func (s *Server) extendedCardMembers(card map[string]any) {
	if caps, ok := card["capabilities"].(map[string]any); ok && !s.opts.noExtendedCard {
		caps["extendedAgentCard"] = true
	}
}

// v03ExtendedCard reports whether the v0.3 card declares the
// authenticated extended card: served, and authentication configured.
// v0.3 names it for authentication and its TCK requires the method to
// refuse a call without credentials (test_authenticated_extended_card_
// without_auth); with authentication off nobody has any, so v0.3 does not
// declare it and answers -32007, while v1.0 serves it to every caller of a
// card that declares no security scheme (the v1.0 TCK's CARD-EXT-001).
func (s *Server) v03ExtendedCard() bool {
	return !s.opts.noExtendedCard && s.opts.auth != nil && !s.opts.auth.Open()
}

// PrincipalExtension is the URI of the extended card's extension that
// tells the caller who the pipeline takes it for and what it may use.
const PrincipalExtension = "https://e2a-pipeline.dev/extensions/principal/v1"

// WithExtendedCard declares and serves the extended agent card (on by
// default); off, cards do not declare it and GetExtendedAgentCard is
// UnsupportedOperationError (A2A v1.0 §3.3.4). It takes any value.
func WithExtendedCard(on bool) Option {
	return func(o *options) error { o.noExtendedCard = !on; return nil }
}

// profileCache caches the pools' profiles: a message's check must not
// cost a key-value read each time.
type profileCache struct {
	mu sync.Mutex
	m  map[string]cachedProfile
}

type cachedProfile struct {
	p  a2av1.Profile
	at time.Time
}

// profileTTL is how long a pool's profile is cached (a bridge or e2a dev
// publishes it before its workers start).
const profileTTL = 5 * time.Second

// poolProfile is pool's profile from its pool info (bridge.PoolInfo:
// Streaming, RequiredExtensions); a pool without info streams and requires
// nothing, and so does one whose info cannot be read (logged).
func (s *Server) poolProfile(ctx context.Context, pool string) a2av1.Profile {
	if pool == "" {
		pool = s.opts.defaultPool
	}
	c := &s.profiles
	c.mu.Lock()
	e, ok := c.m[pool]
	c.mu.Unlock()
	if ok && time.Since(e.at) < profileTTL {
		return e.p
	}
	p := a2av1.DefaultProfile
	info, found, err := bridge.LookupPool(ctx, s.js, pool)
	switch {
	case err != nil:
		s.opts.log.Warn("pool profile: pool info unreadable; taken as streaming, no extension required", "pool", pool, "err", err)
		return p
	case found:
		p = a2av1.Profile{Streaming: info.Streaming, RequiredExtensions: slices.Clone(info.RequiredExtensions)}
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 10000 {
		c.m = map[string]cachedProfile{} // pool names come from clients: bounded
	}
	c.m[pool] = cachedProfile{p: p, at: time.Now()}
	c.mu.Unlock()
	return p
}

// cardProfile writes pool's profile into card: streaming false when the
// pool does not stream, each required extension in
// capabilities.extensions with required true.
func (s *Server) cardProfile(ctx context.Context, card map[string]any, pool string) {
	p := s.poolProfile(ctx, pool)
	caps, ok := card["capabilities"].(map[string]any)
	if !ok {
		return
	}
	if !p.Streaming {
		caps["streaming"] = false
	}
	exts, _ := caps["extensions"].([]any)
	for _, uri := range p.RequiredExtensions {
		exts = append(exts, map[string]any{"uri": uri, "required": true,
			"description": "Required by this agent: activate it with the A2A-Extensions service parameter (header or gRPC metadata)"})
	}
	if len(exts) > 0 {
		caps["extensions"] = exts
	}
}

// PoolProfile is the pool's profile (a2av1.CardHost).
func (h protocolHost) PoolProfile(ctx context.Context, pool string) a2av1.Profile {
	return h.s.poolProfile(ctx, pool)
}

var _ a2av1.CardHost = protocolHost{}

// PoolCapabilities is the pool's profile for the A2A v0.3 endpoint
// (a2aproto.Profiles).
func (h protocolHost) PoolCapabilities(ctx context.Context, pool string) (bool, []string) {
	p := h.s.poolProfile(ctx, pool)
	return p.Streaming, p.RequiredExtensions
}

var _ a2aproto.Profiles = protocolHost{}

// Why extendedCard refuses.
var (
	errExtendedCardOff       = errors.New("this agent serves no extended agent card (its card does not declare capabilities.extendedAgentCard)")
	errExtendedCardAnonymous = errors.New("the extended agent card needs an authenticated caller: present one of the card's security schemes")
	errExtendedCardPool      = errors.New("no such agent pool")
)

// ExtendedCard is the extended card of pool ("" the pipeline's) for the
// caller vc (a2av1.CardHost): r is the HTTP call, nil for gRPC, whose
// card lists the HTTP interfaces only when WithPublicURL names them.
func (h protocolHost) ExtendedCard(ctx context.Context, vc host.V1Caller, r *http.Request, pool string) (map[string]any, error) {
	c, ok := vc.(caller)
	if !ok {
		return nil, fmt.Errorf("%w: extended card: no caller", a2a.ErrInternalError)
	}
	card, err := h.s.extendedCard(ctx, c.p, r, pool)
	switch {
	case errors.Is(err, errExtendedCardOff):
		return nil, a2av1.CapabilityUnsupported("extendedAgentCard", err.Error())
	case errors.Is(err, errExtendedCardAnonymous):
		return nil, a2a.NewError(a2a.ErrUnauthenticated, err.Error())
	case err != nil:
		return nil, fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	return card, nil
}

var _ a2aproto.ExtendedCards = protocolHost{}

// AuthenticatedExtendedCard answers A2A v0.3's
// agent/getAuthenticatedExtendedCard (a2aproto.ExtendedCards): the card of
// both generations, as the well-known path serves it, extended as
// ExtendedCard's; refused with -32007 when the v0.3 card does not declare
// it (off, or authentication off: v03ExtendedCard), HTTP 401 and -32007
// for the anonymous caller.
func (h protocolHost) AuthenticatedExtendedCard(in host.Call, c host.RPCCaller) (map[string]any, *host.Refusal) {
	rc, ok := c.(rpcCaller)
	if !ok {
		return nil, &host.Refusal{Status: http.StatusOK, RPCCode: jsonrpc.CodeInternalError, Message: "extended card: no caller"}
	}
	if !h.s.v03ExtendedCard() {
		return nil, &host.Refusal{Status: http.StatusOK, RPCCode: jsonrpc.CodeA2AExtendedCardNotConfigured,
			Message: "no authenticated extended card: it needs authentication, which this pipeline does not configure (A2A v1.0's GetExtendedAgentCard serves the extended card)"}
	}
	card, err := h.s.extendedCard(in.Ctx, rc.p, in.Request, in.Agent)
	switch {
	case errors.Is(err, errExtendedCardOff):
		return nil, &host.Refusal{Status: http.StatusOK, RPCCode: jsonrpc.CodeA2AExtendedCardNotConfigured, Message: err.Error()}
	case errors.Is(err, errExtendedCardAnonymous):
		// HTTP 401, and v0.3's code for the card not available.
		return nil, &host.Refusal{Status: http.StatusUnauthorized, Code: "unauthenticated", RPCCode: jsonrpc.CodeA2AExtendedCardNotConfigured, Message: err.Error()}
	case err != nil:
		return nil, &host.Refusal{Status: http.StatusOK, RPCCode: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return card, nil
}

// extendedCard is the card of pool ("" the pipeline's) at the base URL of
// r (the public URL when r is nil), extended for the principal p.
func (s *Server) extendedCard(ctx context.Context, p Principal, r *http.Request, pool string) (map[string]any, error) {
	if s.opts.noExtendedCard {
		return nil, errExtendedCardOff
	}
	if s.opts.auth != nil && !p.Open && p.Scheme == SchemeNone {
		return nil, errExtendedCardAnonymous
	}
	base := s.opts.publicURL
	if r != nil {
		base = s.baseURL(r)
	}
	var card map[string]any
	if pool != "" {
		var ok bool
		if card, ok = s.poolCard(ctx, base, pool); !ok {
			return nil, fmt.Errorf("%w: %s", errExtendedCardPool, pool)
		}
	} else {
		card = s.agentCard(base, s.grpcURL(base))
		s.listPools(ctx, card, base)
		s.cardProfile(ctx, card, s.opts.defaultPool)
	}
	if base == "" {
		grpcOnly(card)
	}
	s.extendCard(ctx, card, p)
	return card, nil
}

// grpcOnly keeps the gRPC interface alone in a card built without a base
// URL (a gRPC call, no public URL: the HTTP interfaces' address is
// unknown).
func grpcOnly(card map[string]any) {
	ifaces, _ := card["supportedInterfaces"].([]*a2a.AgentInterface)
	card["supportedInterfaces"] = slices.DeleteFunc(slices.Clone(ifaces), func(i *a2a.AgentInterface) bool {
		return i.ProtocolBinding != a2a.TransportProtocolGRPC
	})
}

// extendCard adds to card what the principal p may use: the principal
// extension, the pools' own skills and profiles.
func (s *Server) extendCard(ctx context.Context, card map[string]any, p Principal) {
	caps, _ := card["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		card["capabilities"] = caps
	}
	exts, _ := caps["extensions"].([]any)
	for i, e := range exts {
		if m, ok := e.(map[string]any); ok && m["uri"] == PoolsExtension {
			exts[i] = s.poolsWithProfiles(ctx, m)
		}
	}
	caps["extensions"] = append(exts, map[string]any{"uri": PrincipalExtension,
		"description": "Who this pipeline takes the caller for, and what it may use (the caller's own, nobody else's)",
		"params":      s.principalParams(p)})
	skills, _ := card["skills"].([]any)
	names, _ := s.poolNames(ctx)
	for _, n := range names {
		info, found, err := bridge.LookupPool(ctx, s.js, n)
		if err != nil || !found {
			continue
		}
		for _, sk := range info.Skills {
			sk = maps.Clone(sk)
			sk["id"] = fmt.Sprintf("pool:%s/%v", n, sk["id"])
			tags, _ := sk["tags"].([]any)
			sk["tags"] = append(slices.Clone(tags), "pool:"+n)
			skills = append(skills, sk)
		}
	}
	if len(skills) > 0 {
		card["skills"] = skills
	}
}

// poolsWithProfiles is the pools extension ext with each pool's profile.
func (s *Server) poolsWithProfiles(ctx context.Context, ext map[string]any) map[string]any {
	out := maps.Clone(ext)
	params, _ := ext["params"].(map[string]any)
	pools, _ := params["pools"].([]map[string]any)
	var with []map[string]any
	for _, pl := range pools {
		pl = maps.Clone(pl)
		name, _ := pl["pool"].(string)
		pr := s.poolProfile(ctx, name)
		pl["streaming"] = pr.Streaming
		if len(pr.RequiredExtensions) > 0 {
			pl["requiredExtensions"] = pr.RequiredExtensions
		}
		with = append(with, pl)
	}
	out["params"] = map[string]any{"pools": with}
	return out
}

// principalParams are the principal extension's params for p: its user
// id and identity origin, its roles, its rate limits and its concurrent
// streams (absent when unlimited).
func (s *Server) principalParams(p Principal) map[string]any {
	m := map[string]any{"identityOrigin": p.IdentityOrigin}
	if p.UserID != "" {
		m["principal"] = p.UserID
	}
	if len(p.Roles) > 0 {
		roles := make([]string, len(p.Roles))
		for i, r := range p.Roles {
			roles[i] = string(r)
		}
		m["roles"] = roles
	}
	if l := s.opts.limiter; l != nil {
		lim := l.cfg.Limits
		if o, ok := l.cfg.Overrides[p.UserID]; ok {
			lim = o
		}
		m["rateLimits"] = lim
	}
	if sl := s.opts.streams; sl != nil && sl.max > 0 {
		m["maxStreams"] = sl.max
	}
	return m
}

package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	acpproto "github.com/e2a-pipeline/pipeline/protocols/acp"
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
// authentication is refused (UNAUTHENTICATED; over HTTP with the gate's
// WWW-Authenticate challenges) before anything is read. The answer is the
// card of the interface called (the pipeline's, or a pool's under
// /pools/<pool>/) extended with what that caller may use: the principal
// extension (PrincipalExtension: its user id, identity origin, roles, rate
// limits and concurrent streams, its own and nobody else's), each pool's
// own skills as its bridge published them, and each pool's profile
// (streaming, required extensions) in the pools extension. Ingress says
// what (host.CardInfo with its Caller); the card server (package
// protocols/a2av1's) writes it.

// v03ExtendedCard reports whether the v0.3 card declares the
// authenticated extended card: served, and authentication configured
// (package protocols/a2a's card says why).
func (s *Server) v03ExtendedCard() bool {
	return !s.opts.noExtendedCard && s.opts.auth != nil && !s.opts.auth.Open()
}

// PrincipalExtension is the URI of the extended card's extension that
// tells the caller who the pipeline takes it for and what it may use
// (package protocols/a2av1's).
const PrincipalExtension = a2av1.PrincipalExtension

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
// Streaming, RequiredExtensions, InputModes): read once per profileTTL for
// every check of a call to the pool (streaming, extensions, the media
// types of a message's file parts). A pool without info streams, requires
// nothing and takes the default input modes (normalizer.A2AInputModes),
// and so does one whose info cannot be read (logged).
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
		p = a2av1.Profile{Streaming: info.Streaming, RequiredExtensions: slices.Clone(info.RequiredExtensions), InputModes: slices.Clone(info.InputModes)}
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 10000 {
		c.m = map[string]cachedProfile{} // pool names come from clients: bounded
	}
	c.m[pool] = cachedProfile{p: p, at: time.Now()}
	c.mu.Unlock()
	return p
}

// PoolProfile is the pool's profile (a2av1.CardHost).
func (h protocolHost) PoolProfile(ctx context.Context, pool string) a2av1.Profile {
	return h.s.poolProfile(ctx, pool)
}

var _ a2av1.CardHost = protocolHost{}

// PoolCapabilities is the pool's profile for the A2A v0.3 endpoint
// (a2aproto.Profiles).
func (h protocolHost) PoolCapabilities(ctx context.Context, pool string) (streaming bool, requiredExtensions, inputModes []string) {
	p := h.s.poolProfile(ctx, pool)
	return p.Streaming, p.RequiredExtensions, p.InputModes
}

var _ a2aproto.Profiles = protocolHost{}

// PoolInputModes is the pool's input modes (acp.InputModes), from the
// profile the A2A doors read: ACP's initialize declares image and audio
// by them and session/prompt refuses the media they do not accept.
func (h protocolHost) PoolInputModes(ctx context.Context, pool string) []string {
	return h.s.poolProfile(ctx, pool).InputModes
}

var _ acpproto.InputModes = protocolHost{}

// Why extendedCard refuses.
var (
	errExtendedCardOff       = errors.New("this agent serves no extended agent card (its card does not declare capabilities.extendedAgentCard)")
	errExtendedCardAnonymous = errors.New("the extended agent card needs an authenticated caller: present one of the card's security schemes")
	errExtendedCardPool      = errors.New("no such agent pool")
)

// ExtendedCard is the extended card of pool ("" the pipeline's) for the
// caller vc (a2av1.CardHost): r is the HTTP call, nil for gRPC, whose
// card lists the HTTP interfaces only when WithPublicURL names them. Its
// errors match host.ErrNoExtendedCard, host.ErrUnauthenticated or
// host.ErrUnknownPool, their text the pipeline's.
func (h protocolHost) ExtendedCard(ctx context.Context, vc host.BindingCaller, r *http.Request, pool string) (map[string]any, error) {
	c, ok := vc.(caller)
	if !ok {
		return nil, errors.New("extended card: no caller")
	}
	card, err := h.s.extendedCard(ctx, c.p, r, pool)
	switch {
	case errors.Is(err, errExtendedCardOff):
		return nil, kindError{err: err, kind: host.ErrNoExtendedCard}
	case errors.Is(err, errExtendedCardAnonymous):
		if c.rec != nil { // an HTTP binding's answer: the gate's challenges
			h.s.opts.auth.SetChallenge(c.rec.Header(), nil)
		}
		return nil, kindError{err: err, kind: host.ErrUnauthenticated}
	case errors.Is(err, errExtendedCardPool):
		return nil, kindError{err: err, kind: host.ErrUnknownPool}
	}
	return card, err
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
		// HTTP 401 with the gate's challenges, and v0.3's code for the
		// card not available.
		return nil, &host.Refusal{Status: http.StatusUnauthorized, Code: "unauthenticated", RPCCode: jsonrpc.CodeA2AExtendedCardNotConfigured, Message: err.Error(),
			Challenges: h.s.opts.auth.Challenges(nil)}
	case err != nil:
		return nil, &host.Refusal{Status: http.StatusOK, RPCCode: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return card, nil
}

// extendedCard is the card of pool ("" the pipeline's) at the base URL of
// r (the public URL when r is nil), extended for the principal p: the
// card server's card with what p may use (cardCaller) and every pool's
// profile and own skills as its bridge published them.
func (s *Server) extendedCard(ctx context.Context, p Principal, r *http.Request, pool string) (map[string]any, error) {
	cs := s.cardServer()
	if s.opts.noExtendedCard || cs == nil {
		return nil, errExtendedCardOff
	}
	if s.opts.auth != nil && !p.Open && p.Scheme == SchemeNone {
		return nil, errExtendedCardAnonymous
	}
	base := s.opts.publicURL
	if r != nil {
		base = s.baseURL(r)
	}
	var in host.CardInfo
	if pool != "" {
		var ok bool
		if in, ok = s.poolCardInfo(ctx, base, pool); !ok {
			return nil, fmt.Errorf("%w: %s", errExtendedCardPool, pool)
		}
		names, _ := s.poolNames(ctx)
		for _, n := range names {
			in.Pools = append(in.Pools, host.CardPool{Name: n, CardURL: base + PoolsPath + n + "/.well-known/agent-card.json"})
		}
	} else {
		in = s.rootCardInfo(ctx, base)
	}
	in.GRPCOnly = base == ""
	for i := range in.Pools {
		pl := &in.Pools[i]
		pl.Profile = cardProfile(s.poolProfile(ctx, pl.Name))
		if info, found, err := bridge.LookupPool(ctx, s.js, pl.Name); err == nil && found {
			pl.Skills = info.Skills
		}
	}
	in.Caller = s.cardCaller(p)
	return cs.Card(in), nil
}

// cardCaller is the principal p as an extended card describes it: its
// user id and identity origin, its roles, its rate limits and its
// concurrent streams (0 when unlimited).
func (s *Server) cardCaller(p Principal) *host.CardCaller {
	c := &host.CardCaller{UserID: p.UserID, IdentityOrigin: p.IdentityOrigin}
	for _, r := range p.Roles {
		c.Roles = append(c.Roles, string(r))
	}
	if l := s.opts.limiter; l != nil {
		lim := l.cfg.Limits
		if o, ok := l.cfg.Overrides[p.UserID]; ok {
			lim = o
		}
		c.RateLimits = lim
	}
	if sl := s.opts.streams; sl != nil && sl.max > 0 {
		c.MaxStreams = sl.max
	}
	return c
}

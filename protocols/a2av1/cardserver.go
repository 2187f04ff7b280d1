package a2av1

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// The agent card of both generations, as the registry's A2A v1.0 entry
// serves it (host.CardServer): package protocols/a2a's v0.3 card made one
// for both generations (AddCard), with the pipeline's pools, the card's
// pool and its profile, and for an extended card what its caller may use.

// PoolsExtension is the URI of the card extension listing the
// pipeline's agent pools and their cards.
const PoolsExtension = "https://e2a-pipeline.dev/extensions/pools/v1"

// PrincipalExtension is the URI of the extended card's extension that
// tells the caller who the pipeline takes it for and what it may use.
const PrincipalExtension = "https://e2a-pipeline.dev/extensions/principal/v1"

// Service is A2A v1.0 as the registry serves it: its bindings
// (host.BindingServer, [Serve]) and the agent card (host.CardServer).
type Service struct{}

var (
	_ host.BindingServer = Service{}
	_ host.CardServer    = Service{}
)

// Bindings are [Serve]'s.
func (Service) Bindings(h host.BindingHost) host.Bindings { return Serve(h) }

// Card is the card of both generations that in describes: package
// protocols/a2a's v0.3 card declaring the extended card
// (capabilities.extendedAgentCard) when in.ExtendedCard, made one for
// both generations ([AddCard]); a pool's card named and described by
// what its bridge published, its gRPC interface with the pool as tenant;
// the pipeline's card listing the pools ([PoolsExtension] and a skill
// each); the card's pool's profile (streaming false, required
// extensions); the gRPC interface alone when in.GRPCOnly; for an
// extended card ([host.CardInfo.Caller]) the pools' profiles and own
// skills and the caller ([PrincipalExtension]).
func (Service) Card(in host.CardInfo) map[string]any {
	m := a2aproto.Card(in)
	if caps, ok := m["capabilities"].(map[string]any); ok && in.ExtendedCard {
		caps["extendedAgentCard"] = true
	}
	AddCard(m, in.Base, in.GRPC)
	if in.Pool != nil {
		poolMembers(m, *in.Pool)
	} else {
		listPools(m, in.Pools)
	}
	if in.Profile != nil {
		cardProfile(m, *in.Profile)
	}
	if in.GRPCOnly {
		grpcOnly(m)
	}
	if in.Caller != nil {
		extendCard(m, in)
	}
	return m
}

// CardView is the v1.0 card alone ([V1Card]) for a v1.0 client
// (wantsV1Card), else card as it is; its security requirements' scopes
// in the form the client reads ([ProtoScopes], unless readsBareScopes).
func (Service) CardView(r *http.Request, card map[string]any) (any, error) {
	var v any = card
	if wantsV1Card(r) {
		c, err := V1Card(card)
		if err != nil {
			return nil, err
		}
		v = c
	}
	if readsBareScopes(r) {
		return v, nil
	}
	return ProtoScopes(v)
}

// readsBareScopes reports whether r's client is Go's HTTP client (its
// default User-Agent), which the official Go SDK's card resolver is:
// a2a-go (v2.4.0, its issue 430) reads a security requirement's scopes
// only as a bare list ({"schemes":{"apiKey":[]}}, the form it writes) and
// refuses the specification's ProtoJSON form ({"apiKey":{"list":[]}},
// a2a.proto's map<string, StringList>), which the Java SDK's client alone
// reads (the Python and JavaScript SDKs read both): every other client
// gets the specification's form.
func readsBareScopes(r *http.Request) bool {
	return strings.HasPrefix(r.UserAgent(), "Go-http-client/")
}

// wantsV1Card reports whether r is an A2A v1.0 client's: it asks the card
// beside the v1.0 interface (/a2a/v1/.well-known/…, also under a pool's
// path) or sends A2A-Version 1.x (header or query parameter). Anyone else
// gets the card of both generations (a v1.0 client that sends no version
// reads its members; v0.3 clients need url, preferredTransport and
// protocolVersion, which the v1.0 card schema forbids).
func wantsV1Card(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, Path+"/") {
		return true
	}
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get("A2A-Version"))
	}
	return v == "1" || strings.HasPrefix(v, "1.")
}

// poolMembers names and describes card after pool, as its bridge
// published it or after the pool alone, and sets the tenant of its gRPC
// interface to the pool: the gRPC binding has no path to carry the pool,
// and A2A v1.0's tenant does (a client sends it in every request; the
// handler routes a request's tenant to that pool, pooltenant.go).
func poolMembers(card map[string]any, pool host.CardPool) {
	ifaces, _ := card["supportedInterfaces"].([]*a2a.AgentInterface)
	for _, i := range ifaces {
		if i.ProtocolBinding == a2a.TransportProtocolGRPC {
			i.Tenant = pool.Name
		}
	}
	card["name"] = pool.Title
	if pool.Title == "" {
		card["name"] = "E2A Pipeline: " + pool.Name
	}
	card["description"] = pool.Description
	if pool.Description == "" {
		card["description"] = "The agent pool " + pool.Name + " behind the E2A Pipeline: durable, resumable, on every A2A binding, ACP and E2A."
	}
	if pool.Version != "" {
		card["version"] = pool.Version
	}
	if len(pool.Skills) > 0 {
		card["skills"] = pool.Skills
	} else {
		card["skills"] = []map[string]any{{"id": pool.Name, "name": pool.Name, "description": "Requests to the agent pool " + pool.Name + ".", "tags": []string{"agent"}}}
	}
	if len(pool.InputModes) > 0 {
		card["defaultInputModes"] = pool.InputModes
	}
	if len(pool.OutputModes) > 0 {
		card["defaultOutputModes"] = pool.OutputModes
	}
}

// listPools adds to the pipeline's card one skill per agent pool and the
// pools extension naming each pool's card URL.
func listPools(card map[string]any, pools []host.CardPool) {
	if len(pools) == 0 {
		return
	}
	skills, _ := card["skills"].([]any)
	var list []map[string]any
	for _, p := range pools {
		list = append(list, map[string]any{"pool": p.Name, "card": p.CardURL})
		skills = append(skills, map[string]any{"id": "pool:" + p.Name, "name": p.Name,
			"description": "The agent pool " + p.Name + "; its own card: " + p.CardURL, "tags": []string{"pool"}})
	}
	card["skills"] = skills
	if caps, ok := card["capabilities"].(map[string]any); ok {
		exts, _ := caps["extensions"].([]any)
		caps["extensions"] = append(exts, map[string]any{"uri": PoolsExtension,
			"description": "The agent pools behind this pipeline, each an agent of its own", "params": map[string]any{"pools": list}})
	}
}

// cardProfile writes the profile p into card: streaming false when the
// pool does not stream, each required extension in
// capabilities.extensions with required true, and the pool's input modes
// as defaultInputModes when it declares some (the pipeline's card
// describes its default pool: the modes its doors check a file part
// against).
func cardProfile(card map[string]any, p host.PoolProfile) {
	if len(p.InputModes) > 0 {
		card["defaultInputModes"] = p.InputModes
	}
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

// grpcOnly keeps the gRPC interface alone in a card built without a base
// URL (a gRPC call, no public URL: the HTTP interfaces' address is
// unknown).
func grpcOnly(card map[string]any) {
	ifaces, _ := card["supportedInterfaces"].([]*a2a.AgentInterface)
	card["supportedInterfaces"] = slices.DeleteFunc(slices.Clone(ifaces), func(i *a2a.AgentInterface) bool {
		return i.ProtocolBinding != a2a.TransportProtocolGRPC
	})
}

// extendCard adds to card what in's caller may use: the pools' profiles
// in the pools extension, the principal extension, the pools' own skills.
func extendCard(card map[string]any, in host.CardInfo) {
	caps, _ := card["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		card["capabilities"] = caps
	}
	exts, _ := caps["extensions"].([]any)
	for i, e := range exts {
		if m, ok := e.(map[string]any); ok && m["uri"] == PoolsExtension {
			exts[i] = poolsWithProfiles(m, in.Pools)
		}
	}
	caps["extensions"] = append(exts, map[string]any{"uri": PrincipalExtension,
		"description": "Who this pipeline takes the caller for, and what it may use (the caller's own, nobody else's)",
		"params":      principalParams(*in.Caller)})
	skills, _ := card["skills"].([]any)
	for _, p := range in.Pools {
		for _, sk := range p.Skills {
			sk = maps.Clone(sk)
			sk["id"] = fmt.Sprintf("pool:%s/%v", p.Name, sk["id"])
			tags, _ := sk["tags"].([]any)
			sk["tags"] = append(slices.Clone(tags), "pool:"+p.Name)
			skills = append(skills, sk)
		}
	}
	if len(skills) > 0 {
		card["skills"] = skills
	}
}

// poolsWithProfiles is the pools extension ext with each pool's profile
// (of pools, by name).
func poolsWithProfiles(ext map[string]any, pools []host.CardPool) map[string]any {
	out := maps.Clone(ext)
	params, _ := ext["params"].(map[string]any)
	listed, _ := params["pools"].([]map[string]any)
	var with []map[string]any
	for _, pl := range listed {
		pl = maps.Clone(pl)
		name, _ := pl["pool"].(string)
		var pr host.PoolProfile
		if i := slices.IndexFunc(pools, func(p host.CardPool) bool { return p.Name == name }); i >= 0 {
			pr = pools[i].Profile
		}
		pl["streaming"] = pr.Streaming
		if len(pr.RequiredExtensions) > 0 {
			pl["requiredExtensions"] = pr.RequiredExtensions
		}
		with = append(with, pl)
	}
	out["params"] = map[string]any{"pools": with}
	return out
}

// principalParams are the principal extension's params for c: its user
// id and identity origin, its roles, its rate limits and its concurrent
// streams (absent when unlimited).
func principalParams(c host.CardCaller) map[string]any {
	m := map[string]any{"identityOrigin": c.IdentityOrigin}
	if c.UserID != "" {
		m["principal"] = c.UserID
	}
	if len(c.Roles) > 0 {
		m["roles"] = c.Roles
	}
	if c.RateLimits != nil {
		m["rateLimits"] = c.RateLimits
	}
	if c.MaxStreams > 0 {
		m["maxStreams"] = c.MaxStreams
	}
	return m
}

// extendedCardError is the SDK's kind of an error of the host's
// extended card (CardHost.ExtendedCard), its text kept: the card not
// declared is UnsupportedOperationError naming the capability (gRPC
// UNIMPLEMENTED), the anonymous caller Unauthenticated, an unknown pool
// InvalidParams, anything else InternalError.
func extendedCardError(err error) error {
	switch {
	case errors.Is(err, host.ErrNoExtendedCard):
		return CapabilityUnsupported("extendedAgentCard", err.Error())
	case errors.Is(err, host.ErrUnauthenticated):
		return a2a.NewError(a2a.ErrUnauthenticated, err.Error())
	case errors.Is(err, host.ErrUnknownPool):
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	return fmt.Errorf("%w: extended card: %v", a2a.ErrInternalError, err)
}

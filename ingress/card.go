package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Version is the pipeline version announced in the agent card.
const Version = "0.1.0"

// TRPCInteractionVersion is the version of the trpc-a2a-version extension
// (a2a-interaction-spec-trpc.md) the A2A renderers implement.
const TRPCInteractionVersion = a2aproto.InteractionVersion

// TRPCInteractionExtension is the URI of the trpc interaction-spec
// extension in the card and in X-A2A-Extensions (protocols/a2a's).
const TRPCInteractionExtension = a2aproto.InteractionExtension

// baseURL is the externally visible base URL: the configured public URL,
// else X-Forwarded-Proto/X-Forwarded-Host, else the request's own host.
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.publicURL != "" {
		return s.opts.publicURL
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	if p := firstToken(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
		proto = p
	}
	host := r.Host
	if h := firstToken(r.Header.Get("X-Forwarded-Host")); h != "" && !strings.ContainsAny(h, "/\\ @") {
		host = h
	}
	prefix := ""
	if p := firstToken(r.Header.Get("X-Forwarded-Prefix")); strings.HasPrefix(p, "/") && !strings.ContainsAny(p, " \\") {
		prefix = strings.TrimRight(p, "/")
	}
	return proto + "://" + host + prefix
}

func firstToken(v string) string {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// AgentCard returns the agent card of the pipeline's endpoints for base
// URL base, without its pools: the card of the registry's card server
// (host.CardServer: A2A's, of both generations, package protocols/a2av1),
// nil when no protocol serves one.
func (s *Server) AgentCard(base string) map[string]any {
	cs := s.cardServer()
	if cs == nil {
		return nil
	}
	return cs.Card(s.cardInfo(base))
}

// cardServer is the card server of the server's registry (the default
// registry for a server built without New), nil when none serves a card.
func (s *Server) cardServer() host.CardServer {
	reg := s.opts.protocols
	if reg == nil {
		reg = protocols.Default()
	}
	_, cs, _ := reg.Card()
	return cs
}

// cardInfo is what a card of the endpoints under base declares of the
// server: its interfaces (the gRPC binding's address for base), version,
// default pool, push, the extended card, and the authentication
// configured, its token URL resolved against base.
func (s *Server) cardInfo(base string) host.CardInfo {
	in := host.CardInfo{Base: base, GRPC: s.grpcURL(base), Version: Version, DefaultPool: s.opts.defaultPool,
		Push: s.opts.push != nil, ExtendedCard: !s.opts.noExtendedCard, Authentication: s.opts.auth != nil && !s.opts.auth.Open()}
	if a := s.opts.auth; a != nil {
		sec := a.SecuritySchemesFor(base)
		if len(sec.SecuritySchemes) > 0 {
			in.Auth.Schemes, in.Auth.Requirements = sec.SecuritySchemes, sec.Security
		}
		for _, m := range a.AgentVaultAuthSchemes(base) {
			in.Auth.Methods = append(in.Auth.Methods, host.CardAuthMethod(m))
		}
	}
	return in
}

// rootCardInfo is cardInfo for the pipeline's card: its pools, each with
// its own card's URL, and the default pool's profile.
func (s *Server) rootCardInfo(ctx context.Context, base string) host.CardInfo {
	in := s.cardInfo(base)
	if names, err := s.poolNames(ctx); err == nil {
		for _, n := range names {
			in.Pools = append(in.Pools, host.CardPool{Name: n, CardURL: base + PoolsPath + n + "/.well-known/agent-card.json"})
		}
	}
	pr := cardProfile(s.poolProfile(ctx, s.opts.defaultPool))
	in.Profile = &pr
	return in
}

// cardProfile is a pool's profile as a card declares it.
func cardProfile(p a2av1.Profile) host.PoolProfile {
	return host.PoolProfile{Streaming: p.Streaming, RequiredExtensions: p.RequiredExtensions, InputModes: p.InputModes}
}

// grpcURL is the address of the A2A v1.0 gRPC binding the card lists
// (WithA2AGRPCAddress), "" when the binding is not served. Its host is
// base's when the listener's is unspecified (0.0.0.0, ::, empty), and when
// it is a loopback address and base's host is one too (a card read on the
// same machine names it as its reader did, e.g. localhost, rather than
// 127.0.0.1).
func (s *Server) grpcURL(base string) string {
	if s.opts.grpcAddr == "" {
		return ""
	}
	host, port, _ := net.SplitHostPort(s.opts.grpcAddr)
	var baseHost string
	if u, err := url.Parse(base); err == nil {
		baseHost = u.Hostname()
	}
	ip := net.ParseIP(host)
	switch {
	case baseHost == "":
	case host == "" || (ip != nil && ip.IsUnspecified()):
		host = baseHost
	case ip != nil && ip.IsLoopback() && isLoopbackHost(baseHost):
		host = baseHost
	}
	return net.JoinHostPort(host, port)
}

// isLoopbackHost reports whether h names this machine: localhost or a
// loopback address.
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// handleCard answers the agent card of the registry's card server:
// the pipeline's, or under /pools/<pool>/ the pool's (poolCardInfo; 404
// for a pool no worker ever served and no bridge published), in the form
// the client reads (host.CardServer.CardView).
func (s *Server) handleCard(w http.ResponseWriter, r *http.Request) {
	cs := s.cardServer()
	if cs == nil {
		http.NotFound(w, r)
		return
	}
	base := s.baseURL(r)
	var in host.CardInfo
	if pool, ok := poolFromContext(r.Context()); ok {
		if in, ok = s.poolCardInfo(r.Context(), base, pool); !ok {
			e2aproto.WriteError(w, http.StatusNotFound, "unknown_agent", "no agent pool named "+pool, false)
			return
		}
	} else {
		in = s.rootCardInfo(r.Context(), base)
	}
	w.Header().Set("Cache-Control", "public, max-age=60")
	s.writeCard(w, r, cs, cs.Card(in))
}

// mountCard serves the agent card of p's service cs (host.CardServer) at
// /.well-known/agent-card.json and /.well-known/agent.json, and beside
// each of p's HTTP paths (<path>/.well-known/agent-card.json: clients and
// the A2A TCK that are given an interface URL look for the card there).
func (s *Server) mountCard(mux *http.ServeMux, p protocols.Protocol) {
	mux.HandleFunc("GET /.well-known/agent-card.json", s.handleCard)
	mux.HandleFunc("GET /.well-known/agent.json", s.handleCard)
	for _, path := range p.Paths {
		if strings.HasPrefix(path, "/") {
			mux.HandleFunc("GET "+path+"/.well-known/agent-card.json", s.handleCard)
			// Another method is the E2A 405, not the answer of what
			// serves the rest of path's subtree (A2A v1.0's HTTP+JSON
			// binding under /a2a/v1/ answered it 404 in text).
			mux.HandleFunc(path+"/.well-known/agent-card.json", egress.MethodNotAllowed(http.MethodGet, http.MethodHead))
		}
	}
}

// writeCard answers card in the form r's client reads (cs.CardView; card
// as it is when there is none), with an ETag (a hash of the bytes) and
// Last-Modified (when this server first served those bytes), 304 Not
// Modified when If-None-Match names the ETag (A2A v1.0 §8.6.1). Vary:
// A2A-Version and User-Agent, since they choose the form (the Go SDK's
// client reads a security requirement's scopes in its own form only), and
// without a public URL the X-Forwarded headers baseURL builds the card's
// URLs from.
func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, cs host.CardServer, card map[string]any) {
	v, err := cs.CardView(r, card)
	if err != nil {
		s.opts.log.Warn("agent card: no form for this client; the card served as it is", "err", err)
		v = card
	}
	body, err := json.Marshal(v)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: ErrorDetail{Code: "internal", Message: "agent card"}})
		return
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", cardModified(etag).UTC().Format(http.TimeFormat))
	vary := "A2A-Version, User-Agent"
	if s.opts.publicURL == "" {
		// The card's URLs (the oauth2 tokenUrl among them) come from
		// these headers (baseURL): a shared cache must not serve the
		// card one request's X-Forwarded-Host named to every client.
		vary += ", X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Prefix"
	}
	h.Add("Vary", vary)
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// etagMatch reports whether an If-None-Match value names etag (weak
// comparison, or *).
func etagMatch(ifNoneMatch, etag string) bool {
	for t := range strings.SplitSeq(ifNoneMatch, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// cardTimes remembers when each card (by its ETag) was first served:
// its Last-Modified. The cards are few (generations, pools, base URLs);
// the map is emptied past cardTimesMax.
var cardTimes = struct {
	sync.Mutex
	m map[string]time.Time
}{m: map[string]time.Time{}}

const cardTimesMax = 1024

func cardModified(etag string) time.Time {
	cardTimes.Lock()
	defer cardTimes.Unlock()
	t, ok := cardTimes.m[etag]
	if !ok {
		if len(cardTimes.m) >= cardTimesMax {
			clear(cardTimes.m)
		}
		t = time.Now().Truncate(time.Second)
		cardTimes.m[etag] = t
	}
	return t
}

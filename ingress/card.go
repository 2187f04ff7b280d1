package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// Version is the pipeline version announced in the agent card.
const Version = "0.1.0"

// TRPCInteractionVersion is the version of the trpc-a2a-version extension
// (a2a-interaction-spec-trpc.md) the A2A renderers implement.
const TRPCInteractionVersion = "0.1"

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

// AgentCard returns the A2A v0.3 agent card of the pipeline's /a2a
// endpoint for base URL base.
func (s *Server) AgentCard(base string) map[string]any {
	return s.agentCard(base, s.grpcURL(base))
}

// agentCard is the card of the endpoints under base, listing the gRPC
// binding at grpcURL when it is not empty.
func (s *Server) agentCard(base, grpcURL string) map[string]any {
	card := a2a.AgentCard{
		Name:               "E2A Pipeline",
		Description:        "Durable, horizontally scaled agent traffic on NATS JetStream: A2A v0.3 and the AgentVault profile on one JSON-RPC endpoint.",
		URL:                base + "/a2a",
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            Version,
		// v0.3's authenticated extended card: only with authentication
		// (extcard.go, extendedCardMembers).
		SupportsAuthenticatedExtendedCard: s.v03ExtendedCard(),
		Capabilities: a2a.AgentCapabilities{
			Streaming:              true,
			PushNotifications:      s.opts.push != nil,
			StateTransitionHistory: true,
			Extensions: []a2a.AgentExtension{{
				URI:    TRPCInteractionExtension,
				Params: map[string]any{"version": TRPCInteractionVersion},
			}},
		},
		DefaultInputModes:  normalizer.A2AInputModes,
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID: "pipeline", Name: "Agent pools",
			Description: "Routes each request to an agent pool (" + s.opts.defaultPool + " by default) and streams its answer.",
			Tags:        []string{"agents", "streaming"},
		}},
	}
	b, _ := json.Marshal(card)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	// AgentVault profile: authSchemes lists the configured schemes (none
	// when ingress runs without authentication).
	m["authSchemes"] = []AgentVaultAuthScheme{{Scheme: SchemeNone, Description: "No authentication"}}
	if s.opts.auth != nil {
		sec := s.opts.auth.SecuritySchemesFor(base)
		if len(sec.SecuritySchemes) > 0 {
			m["securitySchemes"] = sec.SecuritySchemes
			m["security"] = sec.Security
		}
		if av := s.opts.auth.AgentVaultAuthSchemes(base); len(av) > 0 {
			m["authSchemes"] = av
		}
	}
	s.extendedCardMembers(m)
	a2av1.AddCard(m, base, grpcURL)
	return m
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

func (s *Server) handleCard(w http.ResponseWriter, r *http.Request) {
	if pool, ok := poolFromContext(r.Context()); ok {
		s.handlePoolCard(w, r, pool)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=60")
	card := s.AgentCard(s.baseURL(r))
	s.listPools(r.Context(), card, s.baseURL(r))
	s.cardProfile(r.Context(), card, s.opts.defaultPool)
	s.writeCard(w, r, card)
}

// wantsV1Card reports whether r is an A2A v1.0 client's: it asks the card
// beside the v1.0 interface (/a2a/v1/.well-known/…, also under a pool's
// path) or sends A2A-Version 1.x (header or query parameter). Anyone else
// gets the card of both generations (a v1.0 client that sends no version
// reads its members; v0.3 clients need url, preferredTransport and
// protocolVersion, which the v1.0 card schema forbids).
func wantsV1Card(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, A2AV1Path+"/") {
		return true
	}
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get("A2A-Version"))
	}
	return v == "1" || strings.HasPrefix(v, "1.")
}

// writeCard answers a card: the v1.0 card alone for a v1.0 client
// (wantsV1Card, a2av1.V1Card), else card as it is; with an ETag (a hash
// of the bytes) and Last-Modified (when this server first served those
// bytes), 304 Not Modified when If-None-Match names the ETag (A2A v1.0
// §8.6.1). Vary: A2A-Version, since the header chooses the card.
func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, card map[string]any) {
	var v any = card
	if wantsV1Card(r) {
		if v1, err := a2av1.V1Card(card); err == nil {
			v = v1
		} else {
			s.opts.log.Warn("agent card: no v1.0 form", "err", err)
		}
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
	h.Add("Vary", "A2A-Version")
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

package a2av1

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Profile is what an agent pool declares of the A2A capabilities it
// offers (its pool info): whether it streams, the A2A extensions a
// request to it must activate, and the media types its file parts may
// have (InputModes; empty: normalizer.A2AInputModes). The zero Profile is
// a pool that does not stream; a pool with no info streams, requires
// nothing and takes the default modes (DefaultProfile).
type Profile struct {
	Streaming          bool
	RequiredExtensions []string
	InputModes         []string
}

// DefaultProfile is the profile of a pool whose info declares nothing.
var DefaultProfile = Profile{Streaming: true}

// CardHost is the optional role of a [Host] that knows the pools'
// profiles and serves the extended agent card; without it every pool
// streams and requires nothing, and GetExtendedAgentCard is
// UnsupportedOperationError.
type CardHost interface {
	// PoolProfile is the profile of pool ("" for the routing rule's
	// default pool).
	PoolProfile(ctx context.Context, pool string) Profile
	// ExtendedCard is the agent card of pool ("" for the pipeline's) for
	// the caller c, extended with what c may use: r is the HTTP call (nil
	// for a gRPC call). Its errors match host.ErrNoExtendedCard (the card
	// does not declare it), host.ErrUnauthenticated (the anonymous caller
	// of optional authentication) or host.ErrUnknownPool; the handler
	// answers them in the SDK's kinds (extendedCardError).
	ExtendedCard(ctx context.Context, c host.BindingCaller, r *http.Request, pool string) (map[string]any, error)
}

// capabilityKey is the ErrorInfo metadata key naming the capability an
// UnsupportedOperationError is about (CapabilityUnsupported).
const capabilityKey = "capability"

// CapabilityUnsupported is UnsupportedOperationError for a capability the
// card does not declare (streaming, extendedAgentCard: A2A v1.0 §3.3.4),
// its ErrorInfo naming the capability: on gRPC it is UNIMPLEMENTED, as
// §5.4 says (specStatus), where the error of a finished task keeps the
// SDK's FAILED_PRECONDITION.
func CapabilityUnsupported(capability, msg string) error {
	return a2a.NewError(a2a.ErrUnsupportedOperation, msg).WithErrorInfoMeta(map[string]string{capabilityKey: capability})
}

// unsupportedCapability reports whether err is CapabilityUnsupported's.
func unsupportedCapability(err error) bool {
	var e *a2a.Error
	if !errors.As(err, &e) || !errors.Is(err, a2a.ErrUnsupportedOperation) {
		return false
	}
	for _, d := range e.TypedDetails {
		if m, ok := d.Value["metadata"].(map[string]string); ok && m[capabilityKey] != "" {
			return true
		}
	}
	return false
}

// check refuses a call to a pool of profile p: SendStreamingMessage or
// SubscribeToTask (streaming) to a pool that does not stream is
// UnsupportedOperationError, a call that does not activate every required
// extension (the A2A-Extensions service parameter: HTTP header, gRPC
// metadata) ExtensionSupportRequiredError, a message (env, normalized; nil
// for SubscribeToTask) with a file part of a media type the pool's input
// modes do not accept ContentTypeNotSupportedError. Nothing has been
// published.
func (p Profile) check(pool string, header http.Header, streaming bool, env *e2a.Envelope) error {
	if streaming && !p.Streaming {
		return CapabilityUnsupported("streaming", fmt.Sprintf("agent pool %q does not stream (its card says capabilities.streaming false): "+
			"send the message with SendMessage", pool))
	}
	var missing []string
	for _, uri := range p.RequiredExtensions {
		if !extensionActivated(header, uri) {
			missing = append(missing, uri)
		}
	}
	if len(missing) > 0 {
		return a2a.NewError(a2a.ErrExtensionSupportRequired, fmt.Sprintf("agent pool %q requires the extension(s) %s: "+
			"activate them with the %s service parameter", pool, strings.Join(missing, ", "), a2a.SvcParamExtensions))
	}
	if env != nil {
		if err := normalizer.CheckInputModes(env, pool, p.InputModes); err != nil {
			return sdkError(err)
		}
	}
	return nil
}

// extensionActivated reports whether header's A2A-Extensions lists uri.
func extensionActivated(header http.Header, uri string) bool {
	for _, v := range header.Values(a2a.SvcParamExtensions) {
		if slices.ContainsFunc(strings.Split(v, ","), func(u string) bool { return strings.TrimSpace(u) == uri }) {
			return true
		}
	}
	return false
}

// checkProfile applies the profile of pool (DefaultProfile for a host
// that knows none) to the call c (streaming: a SendStreamingMessage or
// SubscribeToTask; env: a message's envelope, nil for SubscribeToTask).
func (h *handler) checkProfile(ctx context.Context, c call, pool string, streaming bool, env *e2a.Envelope) error {
	p := DefaultProfile
	if ch, ok := h.h.(CardHost); ok {
		p = ch.PoolProfile(ctx, pool)
	}
	return p.check(pool, c.header, streaming, env)
}

// subscribeRefusal is the profile's refusal of SubscribeToTask on the
// caller's task id (nil when the task is not the caller's: the handler
// answers that).
func (h *handler) subscribeRefusal(ctx context.Context, id string) error {
	c, ok := callFrom(ctx)
	if !ok {
		return nil
	}
	t, err := c.c.Task(ctx, id, tenant.Read)
	if err != nil {
		return nil
	}
	return h.checkProfile(ctx, c, t.Pool, true, nil)
}

// plainRefusal reports whether err is answered as a plain error before a
// stream opens (writePlain): a profile's refusal, which the A2A v1.0
// examples and the TCK read as one JSON answer, not an SSE event.
func plainRefusal(err error) bool {
	return unsupportedCapability(err) || errors.Is(err, a2a.ErrExtensionSupportRequired)
}

// writePlain answers err as a plain JSON error: HTTP+JSON's (rest) or
// JSON-RPC's with the call's id as sent (rpcID; HTTP 200).
func writePlain(w http.ResponseWriter, err error, id json.RawMessage, rest bool) {
	if rest {
		writeREST(w, restError(err))
		return
	}
	writeRPCError(w, http.StatusOK, id, Error(err))
}

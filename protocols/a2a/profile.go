package a2a

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// CodeExtensionSupportRequired is A2A v1.0's ExtensionSupportRequiredError
// code, which the v0.3 endpoint answers too (v0.3 defines no code for a
// required extension the client did not declare).
const CodeExtensionSupportRequired = -32008

// Profiles is the optional role of a [host.TaskHost] that knows what each
// agent pool offers (its pool info): whether it streams, the extensions a
// request to it must declare, and the media types its file parts may
// have. Without it every pool streams, requires nothing and takes
// normalizer.A2AInputModes.
type Profiles interface {
	// PoolCapabilities is pool's profile ("" for the default pool's);
	// inputModes empty: normalizer.A2AInputModes.
	PoolCapabilities(ctx context.Context, pool string) (streaming bool, requiredExtensions, inputModes []string)
}

// admitProfile applies the profile of pool to an A2A v0.3 call of method
// before anything is published: message/stream and tasks/resubscribe to a
// pool that does not stream are -32004 (UnsupportedOperation), a call
// that does not declare every required extension in X-A2A-Extensions (or
// A2A-Extensions) -32008, a message (env; nil for tasks/resubscribe) with
// a file part of a media type the pool's input modes do not accept -32005
// (ContentTypeNotSupported). It answered rep when it returns false.
func (d *frontDoor) admitProfile(rep host.Reply, in host.Call, protocol, pool, method string, env *e2a.Envelope) bool {
	if protocol != normalizer.ProtocolA2A {
		return true
	}
	streaming, required, modes := true, []string(nil), []string(nil)
	if pr, ok := d.h.(Profiles); ok {
		streaming, required, modes = pr.PoolCapabilities(in.Ctx, pool)
	}
	if Streaming(method) && !streaming {
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeA2AUnsupportedOperation, Message: fmt.Sprintf(
			"agent pool %q does not stream (its card says capabilities.streaming false): send the message with message/send", pool)})
		return false
	}
	var missing []string
	for _, uri := range required {
		if !declared(in.Header, uri) {
			missing = append(missing, uri)
		}
	}
	if len(missing) > 0 {
		rep.Error(&jsonrpc.Error{Code: CodeExtensionSupportRequired, Message: fmt.Sprintf(
			"agent pool %q requires the extension(s) %s: declare them in X-A2A-Extensions", pool, strings.Join(missing, ", "))})
		return false
	}
	if env != nil {
		if err := normalizer.CheckInputModes(env, pool, modes); err != nil {
			rep.Error(&jsonrpc.Error{Code: normalizer.JSONRPCCode(err), Message: egress.ClientMessage(err)})
			return false
		}
	}
	return true
}

// declared reports whether header's X-A2A-Extensions (v0.3) or
// A2A-Extensions (v1.0) lists uri.
func declared(header http.Header, uri string) bool {
	for _, name := range [...]string{"X-A2a-Extensions", "A2a-Extensions"} {
		for _, h := range header[name] {
			if slices.ContainsFunc(strings.Split(h, ","), func(u string) bool { return strings.TrimSpace(u) == uri }) {
				return true
			}
		}
	}
	return false
}

// echoExtensions lists in the X-A2A-Extensions header of the answer to an
// A2A v0.3 call of method the extensions of the card it requested that act
// on it (v0.3 topics/extensions.md: "the response should include the
// X-A2A-Extensions header identifying all extensions that were
// activated"): the trpc interaction spec, on a message or a
// resubscription. A pool's required extensions are its agent's to
// activate: the pipeline only checks they were requested.
func echoExtensions(rep host.Reply, in host.Call, method string) {
	switch method {
	case normalizer.A2AMessageSend, normalizer.A2AMessageStream, normalizer.A2ATasksResubscribe:
		if declared(in.Header, InteractionExtension) {
			rep.Header().Set("X-A2A-Extensions", InteractionExtension)
		}
	}
}

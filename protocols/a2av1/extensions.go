package a2av1

import (
	"context"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
)

// activatedExtensions is the A2A-Extensions value of the answer to a call
// whose service parameters are header: the card's extensions the call
// requested that act on it (A2A §3.2.5 and topics/extensions.md: the
// response lists the extensions activated for the request), "" for none.
// The trpc interaction spec (a2aproto.InteractionExtension) acts on a
// message (message) and a subscription (subscribe), ReplayExtension on a
// subscription. A pool's required extensions are its agent's to
// activate: the pipeline only checks they were requested.
func activatedExtensions(header http.Header, message, subscribe bool) string {
	var out []string
	if (message || subscribe) && extensionActivated(header, a2aproto.InteractionExtension) {
		out = append(out, a2aproto.InteractionExtension)
	}
	if subscribe && ReplayRequested(header) {
		out = append(out, ReplayExtension)
	}
	return strings.Join(out, ",")
}

// echoExtensions sets the A2A-Extensions header of the answer to an HTTP
// call (checkRPC: JSON-RPC, with head; else HTTP+JSON) to the extensions
// it activates.
func echoExtensions(w http.ResponseWriter, r *http.Request, head rpcHead, checkRPC bool) {
	var message, subscribe bool
	if checkRPC {
		message = head.Method == "SendMessage" || head.Method == methodSendStreamingMessage
		subscribe = head.Method == methodSubscribeToTask
	} else {
		p := r.URL.Path
		message = r.Method == http.MethodPost && (strings.HasSuffix(p, "/message:send") || strings.HasSuffix(p, "/message:stream"))
		subscribe = strings.HasSuffix(p, ":subscribe")
	}
	if ext := activatedExtensions(r.Header, message, subscribe); ext != "" {
		w.Header().Set(a2a.SvcParamExtensions, ext)
	}
}

// echoGRPCExtensions sends, as the a2a-extensions header metadata of the
// gRPC call ctx serves, the extensions it activates.
func echoGRPCExtensions(ctx context.Context, header http.Header) {
	m, _ := grpc.Method(ctx)
	name := m[strings.LastIndexByte(m, '/')+1:]
	ext := activatedExtensions(header, name == "SendMessage" || name == "SendStreamingMessage", name == "SubscribeToTask")
	if ext != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(strings.ToLower(a2a.SvcParamExtensions), ext))
	}
}

// Package a2av1 is A2A v1.0 as one package: the request handler of
// a2a-go's server SDK (a2asrv.RequestHandler) over the pipeline, its three
// bindings as thin adapters over the SDK's transports, its error table and
// the v1.0 part of the agent card.
//
// The handler answers every v1.0 method: SendMessage and
// SendStreamingMessage (the v1.0 message converted losslessly to v0.3 by
// the SDK's a2av0 layer and read by the normalizer's A2A adapter, then
// published and recorded on its task like a v0.3 message/send or
// message/stream: a message naming a task continues the caller's own,
// else not found, a finished one is UnsupportedOperation (the retry of a
// turn it holds, same Idempotency-Key, the duplicate), an interrupted
// one (input-required, auth-required) takes the answer; a context id
// the client chose must be the caller's), GetTask, ListTasks (the caller's
// A2A tasks, the most recent status first, filtered by context, state and
// status time, in pages joined by an opaque cursor of the last task's
// status timestamp and id), CancelTask, SubscribeToTask (the task rebuilt from the durable
// streams, then its running request live; a finished task is
// UnsupportedOperation unless the call activates [ReplayExtension]), the
// push-config methods (served by the push store when the host has one, the
// request's tenant checked as every method's; else PushNotificationNotSupported,
// as the card then declares) and the extended card (served when configured).
// Answers are package protocols/a2a's A2A v1.0 events and values
// of the requests' frames ([Answers]: protocols/a2a/a2amap's mapping,
// shared with A2A v0.3, which converts them at its edge), written as they
// are: one mapping, each event built once.
//
// [Bindings], the registry's (protocols.Protocol.Service, a host.BindingServer through [Serve], on the A2AV1
// entry), are the SDK's JSON-RPC and HTTP+JSON handlers ([Path]) and its
// gRPC service (a2agrpc), each call admitted by the host's gate before
// the SDK decodes anything: over HTTP the [host.Gate] (refusals as
// JSON-RPC errors, or in the HTTP+JSON binding's google.rpc.Status shape),
// the JSON-RPC body then checked for what the SDK would answer poorly (a
// batch, a v0.3 method name, params with proto field names or with
// integers and enums in ProtoJSON's other forms: protonumbers.go; an
// HTTP+JSON body read the same way, a member by both its names, twice
// by one, or by two names that differ in case alone (one field to
// encoding/json) refused as ProtoJSON refuses it, and an HTTP+JSON GET's query as the gRPC-gateway
// reads it: restquery.go), and what
// the SDK answers unlike the specification answered as it says (wire.go: a
// body that is not JSON by its Content-Type, the HTTP+JSON binding's §5.4
// statuses and its router's text 404 and 405 (a path none of its routes
// take, at the root, a pool's path or after a tenant: 404 NOT_FOUND; a
// route asked with another method: 405 with Allow) in its error shape,
// SubscribeToTask on a finished task before a stream opens;
// rpcid.go: the call's JSON-RPC id written back as sent in every answer
// and event, where the SDK decodes it into a float64 or a Go string and
// encodes it again, and a call without an id, a notification, run and
// answered 204 as /a2a answers it, not with id null);
// over gRPC the [host.HeaderGate] on the
// call's metadata read as headers (refusals as gRPC statuses; the agent
// pool is the [GRPCAgentMetadata] key), wrapped around the service's own
// method handlers, so the server's other services (reflection) are not
// gated; a request message that does not decode is INVALID_ARGUMENT, on
// the streaming methods too (the binding's codec, which the server
// registers: Bindings' GRPCServerOptions), and so is a streaming call
// sending no request message or several (their stream counts them); a
// stream whose client stops reading is cut off after the host's write
// timeout, UNAVAILABLE (cutSlow: grpc-go's SendMsg waits for the client's
// window with no deadline). So is a client of the HTTP bindings that stops
// reading what the SDK's handler writes itself (SubscribeToTask's stream,
// a blocking SendMessage's answer, any other call's: bindings.cutSlow,
// egress.CutSlow), as egress's own streams are. The SDK logs to the host's
// logger, what it logs at Error of a call whose write to its client failed
// (a client gone or cut) at Debug (sdkLogger). The handler reads a transport-free call from the context (its
// headers, agent pool, A2A-Version and the admitted [host.BindingCaller]), and
// reaches the pipeline only through [Host] and [host.BindingCaller]:
// the task store under the ownership rule ([host.TaskStore]: every read
// and listing is the caller's, or the audit and admin roles'), the
// publish, the stream slots, the A2A answers and the cancel. Errors are
// mapped onto the SDK's (sdkError), whose transports write each binding's
// code, but for gRPC's UNIMPLEMENTED where §5.4 says so (specStatus), and
// for a call refused for want of a stream slot (a stream, a blocking
// SendMessage): 429 with Retry-After on the HTTP bindings, gRPC
// RESOURCE_EXHAUSTED with a RetryInfo, as every door answers it.
//
// One call does not take the SDK's transport once it is published:
// SendStreamingMessage on the JSON-RPC and HTTP+JSON bindings, the stream
// every official client opens. The SDK's transport sends each event
// through a goroutine and a channel and flushes it alone; the binding
// (streamRPC, streamREST) instead has egress serve the request's frames
// with the package's renderer ([NewStream], [NewRESTStream], format
// [StreamFormat]), which writes the bytes the SDK's transports write for
// the same events and errors ([Error], restError),
// through egress's Output: a burst of frames in one write, a plain text
// chunk straight from the frame's bytes. What is refused before the
// stream opens is on JSON-RPC still the SDK's answer (the refusal handed
// to the handler's SendStreamingMessage on the call), on HTTP+JSON the
// plain HTTP error answer message:send would get (§11.6: the error code is
// the HTTP status), not a 200 stream whose one event is the error. Its conformance
// goldens are under testdata/a2av1_sse[_basic|_text_only|_rest]/, and
// TestStreamMatchesSDK compares it with the SDK's transports over the
// same frames.
//
// The host (ingress) keeps the transports' mounting (the HTTP handlers at
// [Path], the gRPC server and its reflection), the gate and the task
// store. The agent card is the package's ([Service], a host.CardServer,
// from the host's host.CardInfo): the card of both generations is package
// protocols/a2a's v0.3 card (with its AgentVault and security members), to
// which [AddCard] adds the v1.0 interfaces, security members and
// [ReplayExtension], then the pools ([PoolsExtension]), a pool's own name,
// skills and gRPC tenant, its profile, and for the extended card the
// caller ([PrincipalExtension]); a v1.0 client gets [V1Card] of it, the
// v1.0 card alone, and every client but Go's HTTP client (the Go SDK's,
// which reads no other form) the security requirements' scopes in the
// specification's form, [ProtoScopes] ([Service.CardView]; for the
// extended card over JSON-RPC and HTTP+JSON, protoScopesWriter). A
// single v1.0 call at /a2a reaches the JSON-RPC binding through package
// protocols/a2a (host.TaskHost.BindingRPC), which also holds the v1.0 method
// names (a2a.V1Methods) and the helpers this package shares with v0.3
// (Continued, Interaction): it cannot import this package, which imports
// it.
//
// The v1.0 wire is checked end to end against golden files under
// testdata/wire/ (written by ingress's TestA2AV1WireGolden, which needs
// the whole pipeline: the specification's examples on both HTTP bindings;
// protocols.TestBindingsWire checks they exist), and the
// decoding of SendMessage by FuzzNormalizeV1Send (its corpus under
// testdata/fuzz/).
package a2av1

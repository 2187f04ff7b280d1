// Package jsupstream runs a real A2A agent on the official JavaScript SDK
// for tests: internal/jsclient/server.mjs, @a2a-js/sdk 1.3.0's request
// handler and transports (pinned in internal/jsclient's lockfile with
// the peers its HTTP+JSON and gRPC transports need: express,
// @grpc/grpc-js, @bufbuild/protobuf) under Node.js, with the scenarios and
// content of package a2aupstream (stream, tool, ask, auth, fail, slow,
// message, file, echo). It speaks A2A v1.0 over one binding, the only
// interface its card declares (Options.Binding): JSON-RPC, HTTP+JSON (the
// SDK's express restHandler) or gRPC (its grpcService on a second port);
// or v0.3 (the SDK's compat layer, with a v0.3 card); without streaming,
// or requiring a bearer token, on request.
//
// v0.3 over HTTP+JSON and gRPC is served (the SDK's legacy routers) but
// a2a-go/v2 v2.4.0's v0.3 client cannot use it whole: the SDK answers a
// v0.3 message:send with 201 Created
// (dist/compat/v0_3/server/express/index.js, the /v1/message:send route),
// which the client refuses (a2acompat/a2av0/rest_client.go: only 200 and
// 204), and the SDK's v0.3 proto has no Part.metadata (added to the v0.3
// proto after 0.3.0; dist/compat/v0_3/server/grpc/index.js, Part's
// encode), so thought and function_call markers are lost
// (TestJSV03ProtoGaps).
//
// Start runs `node server.mjs` on a free loopback port, waits for the URL
// it prints and stops it at the test's cleanup. It installs the pinned
// packages with `npm ci` when node_modules is missing. Without node the
// test is skipped, except under CI=true (which .ci/run sets), where it
// fails.
//
// As with a2a-go/v2, @a2a-js/sdk treats auth-required as not final: the
// first stream stays open after it and the next message on the task runs
// the agent again on the same task, which completes it (and the first
// stream too). The SDK wants a task event first on a follow-up turn too;
// an agent that publishes the stored task as is opens the new turn's
// stream with the interrupted state (input-required, auth-required) it
// ended in. This one publishes it in working, so a continuation streams
// working … completed; a client of other JavaScript agents should expect
// either.
//
// With a bearer token, the card declares the scheme and requirement as
// the SDK writes them in proto JSON ("securityRequirements":
// [{"schemes": {"bearer": {}}}]); a2a-go/v2 v2.4.0's card parser refuses
// that (it reads a scheme's scopes as a JSON array), so a Go client of
// such an agent must read its card tolerantly (TestJSBearer).
//
// What the server received ([Server.Record]): every JSON-RPC call with its
// headers, every turn the agent ran with the history it saw, every
// cancel.
package jsupstream

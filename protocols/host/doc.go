// Package host is what a protocol package needs from the pipeline that
// mounts it: the gate (authentication and rate limit, refused in the
// protocol's own error shape), the normalizer and the caller's view of a
// request for it, the submission of an envelope ([Submitter.Submit]: the
// stream slot, the context claim, the subscription to its frames, the
// turn's record and the publish, in one call), and the answer of an
// accepted request from its frames with one of egress's renderers.
//
// For a JSON-RPC protocol it is also the seam between the package's calls
// and the host's transports: the package describes its endpoint
// ([RPCEndpoint]: protocol name, refusal shape, which methods stream, the
// metric label of a method, the answer of one call, and for stdio its
// [Lines]), and the host serves it over HTTP (batches, notifications) and
// lines, handing each call its [Reply] (Result, Error, Refuse, Header,
// Stream), its [Call] (context, headers, agent, channel, the HTTP request
// when there is one) and its [RPCCaller] (input, submit, stream slot, and
// [Sessions]: the caller's sessions in the task store). What such calls
// need beyond [Host] are small role interfaces, composed in [RPCHost]:
// [FromAnswerer] (answer from a sequence without an HTTP request),
// [Frames] (a request's frames and envelope), [Canceler] (a cancel on a
// request's control subject) and [Authentication] (the schemes a
// handshake lists). An endpoint that must see the body before the gate
// sets [RPCEndpoint.Peek] (A2A: a single v1.0 call goes to another
// handler, refusals echo the call's id). A door says which of its calls
// cancel a request of the caller ([RPCEndpoint.Cancels], [WithCancel]
// for an SDK binding's call): the gate admits such a call on the
// principal's budget of cancels when its rate limit is spent. A request's
// query is read with [ReadQuery]: the gate refuses one that is no
// URL-encoded form ([ErrQuery]) at every door, whose ?agent= it would hide.
//
// A2A v0.3 and AgentVault (protocols/a2a) keep tasks and contexts under
// the ownership rule: their caller is a [TaskCaller] ([Tasks]: the
// caller's [Task] record, CheckTaskOpen; a message is submitted as a [Turn]
// of its task, its context claimed), and their
// host a [TaskHost] ([TaskFrames]: the existing requests, their frames
// and their cancel, of which the package makes its A2A answers;
// BindingRPC, the JSON-RPC binding to which a single v1.0 call is handed).
//
// A2A v1.0 (protocols/a2av1) implements a2a-go's request handler behind
// the SDK's transports, which write its Go errors in each binding's shape:
// its caller is a [BindingCaller] ([TaskStore]: the caller's tasks, their
// listing and its contexts, errors returned rather than answered), its
// host its own a2av1.Host ([HeaderGate]: the gate of a gRPC call's
// metadata; its answers: package protocols/a2a's A2A events and values),
// and it hands the host its [Bindings] to mount.
//
// A protocol's service plays these roles for the host, which mounts every
// role it finds in one loop: [RouteServer], [RPCServer], [TaskRPCServer],
// [BindingServer], and [CardServer], which writes the agent card from
// what the host knows ([CardInfo]: interfaces, authentication, pools and
// their profiles, the caller of an extended card) and picks the form a
// client reads; the host serves it (and answers [ErrNoExtendedCard] or
// [ErrUnauthenticated] to an extended card it will not give). A refusal
// for want of credentials carries the gate's challenges
// ([Refusal].Challenges, WWW-Authenticate over HTTP). This package names no
// protocol's types: what is one protocol's is declared in its package.
//
// It is a leaf: the protocol packages (protocols/<name>) import it and
// cannot import ingress, which implements [Host] and [RPCHost] over its
// server, mounts each protocol's [Route]s and serves each [RPCEndpoint]
// from the registry (package protocols). A protocol package only sees
// these small interfaces, so it can be tested over a fake host, and
// ingress stays the one owner of authentication, tenancy, publishing,
// transports and metrics.
package host

// Package bridge puts an agent that already exists behind the pipeline,
// unchanged: an A2A server (bridge/a2abridge), an OpenAI-compatible chat
// completions server (bridge/openai) or any HTTP service that answers E2A
// frames (bridge/httpagent). Each is an [Upstream]; [New] makes it an
// agent.Handler served by agent.Run like any pool, so every request's
// upstream answer becomes the request's ordered, fenced frames and every
// protocol, resume, replay, audit, the console and cancellation work for it
// unchanged.
//
// What [New] adds around every upstream call:
//
//   - a bound on the pool's in-flight upstream calls per process
//     ([WithMaxInFlight]); a request waiting for a slot keeps its delivery
//     alive (the agent runtime's heartbeats) and gives up on cancel;
//   - retries with exponential backoff and full jitter, honouring an
//     upstream's Retry-After, only while nothing was written for the
//     request ([WithRetry]): a request whose frames have started is never
//     re-run from the start (an upstream that can resume does so itself);
//   - upstream errors mapped to e2a.error codes with retryable set
//     truthfully ([Error], [Classify]), their messages cut to
//     [MaxErrorMessage] characters; a call that ended because the
//     request did (its cancel, its deadline, a shutdown) is the request's
//     end, not an upstream error (outcome cancelled);
//   - an upstream's credentials ([Scrubber]) taken out of its error
//     messages and of every frame it fills with its own words (errors of
//     any kind, final frames, interrupts, status messages, the frames'
//     metadata), but not of the answer's streamed content (text deltas:
//     scrubframes.go); a bridge quoting an upstream's words cuts them
//     with [Clip], which scrubs them before the cut;
//   - metrics per pool and upstream ([WithMetrics]): calls by outcome,
//     retries, latency, time to first frame, in-flight calls, and tokens
//     by model and kind from a request's final result's usage (an OpenAI
//     bridge's, an HTTP agent's).
//
// [Client] is the HTTP side every bridge shares: connect and idle timeouts
// (an answer that stops sending bytes for the idle timeout fails with
// code upstream_timeout; a non-2xx answer whose body stalls, with its
// status's code at the idle timeout), an answer cut short by the transport
// (a reset, an HTTP/2 stream reset or GOAWAY) read as upstream_unavailable,
// no redirects, no protocol switch (a 101 answer's connection, which
// neither a context nor the idle timeout ends, is closed at once: the
// answer is its status, upstream_rejected), the upstream's credentials
// ([Credentials]: never logged, never published, never stored), W3C
// trace context (traceparent) propagated to the upstream, and, on the
// clients it gives an SDK (Client.HTTP, Client.HTTPRefusing), a bound on
// the bytes read of an answer's body that is not an event stream, and on
// the body of an answer of Client.Do that is one JSON document
// ([WithMaxBodyBytes], default the answer bound [DefaultMaxAnswerBytes]):
// an SDK reads such an answer (a2a-go's JSON-RPC SendMessage and GetTask)
// whole before any frame is written and counted by [WithMaxAnswerBytes],
// so a huge or endless one ends at the bound, its connection closed,
// upstream_protocol_error, not retryable ([ErrAnswerTooLarge]); so does
// one event of an event stream on those clients larger than the bound
// (a2a-go joins an event's data lines with no bound on their sum).
//
// [Conversations] keeps, per pool and conversation (A2A context, ACP
// session, E2A session_id, A2A task), the upstream's context id, per
// pipeline task of the conversation (a [Thread], [ThreadOf]) the upstream's
// own task id, and the pipeline request ids of its last turns with the
// upstream task each recorded ([Thread.TaskOf]), in the KV bucket
// E2A_BRIDGE, keyed by a hash that includes the conversation's owner
// (e2a.Envelope.Owner: the request's user_id, or the principal whose task an
// admin's turn continues, named by the ingress): a continuation of a task
// reaches that task's upstream task (an admin's answer or cancel too), a
// new task of the conversation a new upstream task in its upstream context,
// a stateless model server gets the earlier turns from the pipeline's
// durable history, and no principal ever reaches another's. A write of a
// conversation ([Conversations.Update]) that meets the bucket without a
// leader (a NATS server's crash, until the cluster elects another) is
// retried until it answers, for up to 20 s (or the caller's bound: the
// a2a bridge's 10 s, the OpenAI bridge's 5 s): the turn's upstream ids
// and its place in the history are not lost to the election.
package bridge

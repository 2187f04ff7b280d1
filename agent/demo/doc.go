// Package demo holds the built-in demo agents, served by `e2a agent --pool
// demo` and by the development server's default pool.
//
// The demo agent ([New]) streams, for a request with text T:
//
//	frame 0      e2a.chunk reasoning  "Thinking about: T"
//	frame 1      e2a.chunk tool       {type: function_call, id, name: "lookup", args: {query: T}}
//	frame 2      e2a.chunk tool       {type: function_response, id, name: "lookup", response: {...}}
//	frames 3..   e2a.chunk text       N pieces of "You said: T" (params.frames, default 5)
//	final        e2a.complete         {"content": the text pieces joined}
//
// with params.delay_ms (default 0) between frames. A2A clients cannot pass
// params: frames and delay_ms are also read from the A2A message metadata
// (a2a_metadata), params winning when both are set. Its output is a pure
// function of the request, and every event is its own frame (Writer.Write,
// never coalesced), so after a crash it resumes exactly after the last frame
// written. params.fail = CODE makes it fail with that code after
// params.fail_after frames (default 0), params.retryable sets the error's
// retryable flag, and params.panic = true makes it panic (for tests).
//
// It can also end its turn asking the client for something ([Ask]):
// params.ask = "input" or "auth" (or a2a_metadata.ask), or a text starting
// with "ask:input" or "ask:auth" (what any A2A, AgentVault or ACP client
// can send), makes it stream
//
//	frame 0      e2a.chunk reasoning  "Thinking about: TOPIC"
//	frame 1      e2a.chunk text       "I need more from you first." (auth: "I need your authorization first.")
//	final        agent.Interrupt      input-required "What should I say about TOPIC? Answer in this task."
//	                                  (auth-required "Authorization required to look up TOPIC: answer in this task to approve.")
//
// where TOPIC is the text after the prefix (or the whole text). The task
// stays open: the client's next message naming it is a new turn, which
// the demo answers as usual ("You said: <the answer>").
//
// The echo agent ([Echo]) writes one text chunk with the text and completes
// with {"content": text}.
package demo

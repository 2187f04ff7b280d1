// Package tck is the scenario agent of the official A2A TCK (the v1.0
// suite, github.com/a2aproject/a2a-tck branch 1.0-dev): a built-in agent
// pool, `tck`, written with the agent SDK like any agent, that does what
// the suite's scenarios/*.feature ask of the agent under test. The suite
// drives it through the A2A message id: each scenario is the message id's
// prefix (the longest that matches wins), and the pipeline carries the
// message id in the envelope's message_id.
//
//	tck-complete-task            status completed, message "Hello from TCK"
//	tck-artifact-text            artifact, text part "Generated text content"; completed
//	tck-artifact-file            artifact, file part output.txt (text/plain, bytes "tck"); completed
//	tck-artifact-file-url        artifact, file part https://example.com/output.txt (output.txt, text/plain); completed
//	tck-artifact-data            artifact, data part {"key": "value", "count": 42}; completed
//	tck-message-response         a Message, not a Task: "Direct message response" (agent.Reply)
//	tck-input-required           the turn ends input-required (agent.Interrupt); the task stays open
//	tck-reject-task              status rejected, message "rejected"
//	tck-stream-001               working; artifact "Stream hello from TCK"; completed
//	tck-stream-002               completed
//	tck-stream-003               working; artifact "Stream task lifecycle"; completed
//	tck-stream-ordering-001      working; artifact "Ordered output"; completed
//	tck-stream-artifact-text     working; artifact "Streamed text content"; completed
//	tck-stream-artifact-file     working; file artifact output.txt (text/plain); completed
//	tck-stream-artifact-chunked  working; artifact chunk "chunk-1 ", last chunk "chunk-2" appended; completed
//	test-resubscribe-message-id  working; LongWait (2 x the suite's streaming timeout, 2 s); completed
//	anything else                status completed, message "Unhandled messageId prefix: <id>"
//
// Every event is an a2a.stream_event frame (§12.5): status updates,
// artifact updates (the A2A v0.3 JSON shape, as bridge/a2abridge writes
// data and file parts) and the direct message, so every A2A binding renders
// them as the agent wrote them. The agent is resumable: its frames are a
// pure function of the request, and a redelivered request continues after
// the frames already written.
//
// `e2a dev` serves the pool beside the demo; `E2A_DEFAULT_POOL=tck e2a dev`
// routes the pipeline's root A2A interfaces (JSON-RPC, HTTP+JSON and gRPC,
// all listed in /.well-known/agent-card.json) to it, which is how the TCK
// runs against the pipeline. The same agent also serves [BasicPool],
// tck-basic, whose pool info ([BasicPoolInfo]: no streaming, the TCK's
// extension required) gives the suite's second run the card it needs;
// `E2A_DEFAULT_POOL=tck-basic e2a dev` routes the root interfaces there.
package tck

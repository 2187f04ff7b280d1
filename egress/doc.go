// Package egress turns the frames of one request into what each client
// expects, from any egress process, for requests finished long ago or still
// running. It never publishes requests.
//
// # Replay engine
//
// [Open] / [Reader.Next] (and the callback form [Replay]) deliver the frames
// of a request in order, exactly once, from a resume point to the final
// frame, with no consumer: the reader subscribes to subjects.Live(id)
// first, catches up with batched direct gets on E2A_RESPONSES (from the
// start, skipping frames before the resume point), then takes the live
// frames, dropping what it already delivered (by E2A-Sequence / stream
// sequence) and reading the stream again on a gap, on a live buffer
// overflow, or after a quiet poll interval (live delivery is at most once).
// A stored message may hold a burst of consecutive frames (E2A-Frames,
// e2a.SplitBurst): the reader takes it whole and delivers its frames one
// by one, each [render.Frame.Raw] the frame's own bytes, so renderers never see a
// burst. Memory per reader is bounded by one direct get batch (1 MiB, or
// one larger message) and the live buffer: 64 messages, fewer when that
// many of the largest the server takes (its max_payload) could hold more
// than 16 MiB, one at least ([WithLiveBuffer], [WithLiveBytes]); a reader
// whose client stopped reading holds no more.
// A request with no frame yet is looked up in E2A_REQUESTS: unknown →
// [ErrNotFound]; accepted but unanswered → the reader waits, calling the
// heartbeat function, up to the wait limits ([ErrWaitTimeout]). The
// Service first tells an unanswered request from an answered one whose
// frames aged out of E2A_RESPONSES (which rolls over long before
// E2A_REQUESTS): its pool's consumer (agent-<pool>) acknowledged it (its
// ack floor is past the envelope; the agent acknowledges only once the
// final frame is stored; consumer info cached a few seconds) →
// [ErrFramesExpired], not a wait. A read whose first stored frame lies
// past its resume point (the first frames aged out), or whose next frames
// age out while it reads (the stream's front passed a slow reader), is
// [ErrFramesExpired] too, not [ErrInvalidFrame]. A stored message that
// breaks the frame contract is [ErrInvalidFrame] to every read that meets
// it, delivered or skipped before the resume point: no sequence of its
// own (null, {}), one its E2A-Sequence header does not name, a negative
// one, or one past what the messages stored before it can hold
// (e2a.MaxBurstFrames each: MaxInt64 is not frames aged out). Options
// validate their values: a bad one makes [Open], [Replay] or [New] return
// an error wrapping [ErrInvalidOption].
//
//	rd, err := egress.Open(ctx, nc, requestID, from, egress.WithHeartbeat(15*time.Second, beat))
//	defer rd.Close()
//	for {
//		f, err := rd.Next(ctx) // a render.Frame: f.Response (decoded), f.Raw (bytes as stored)
//		if err == io.EOF { break } // after the final frame
//		...
//	}
//
// # HTTP surface
//
// [New] returns a [Service] on a connection; [Service.Register] mounts
//
//	GET /v1/requests/{id}/stream   E2A SSE (id: sequence, event: response_kind,
//	                               data: the frame as stored, retry:, comment
//	                               heartbeats also before the first frame), or
//	                               NDJSON with Accept: application/x-ndjson;
//	                               resume with Last-Event-ID or ?from=N
//	GET /v1/requests/{id}          aggregated JSON ([RequestView]): 200 when final,
//	                               202 while running, ?wait=true waits; 404 unknown;
//	                               410 frames_expired: its frames aged out, no History copy
//
// A ?wait= or ?projections= that is no boolean (strconv.ParseBool) is 400
// bad_request ([AnswerParams]), as a malformed resume point is.
//
// Errors are {"error":{"code":"…","message":"…"}} ([APIError], [Classify],
// [WriteError]); the message is [ClientMessage], without the package
// prefixes of the Go error the logs keep ("egress: bad request: …"). Every stream sets X-Accel-Buffering: no and Cache-Control:
// no-cache, flushes when no frame is waiting, ends after the final frame,
// stops its reader when the client goes away, and cuts off a client that
// does not read within the write timeout ([CutSlow] does it for a handler
// that writes its answer itself, an SDK's; metric
// e2a_egress_slow_client_disconnects_total). Metrics (on
// [WithRegisterer]): e2a_egress_streams_open{format},
// e2a_egress_time_to_first_frame_seconds{format},
// e2a_egress_frames_written_total{format},
// e2a_egress_slow_client_disconnects_total{format},
// e2a_egress_streams_total{format,outcome}.
//
// Both read the hot streams. With [WithHistory], a request they no longer
// hold (no envelope and no frame: today's 404) is looked up in the audit
// history ([History]; package internal/audit's Auditor) when its id carries
// a time ([RequestIDTime]), and answered exactly as a finished request is
// from the hot streams, to the principal its envelope's owner allows;
// anyone else gets the 404 of an unknown id. Lookups are bounded per
// Service ([WithHistoryLimits]: 8 at once, 30 s each) and per principal
// ([WithHistoryLookupsPerPrincipal]: 2); one that fails or times out is
// 503, retryable ([ErrHistoryUnavailable]); one that runs into a damaged
// archive batch (an error wrapping archive.ErrCorrupt) is 500
// history_corrupt, not retryable ([ErrHistoryCorrupt]). A request whose envelope is
// still hot but whose frames aged out ([ErrFramesExpired]) is answered
// from the History too; without one, or when it lacks the request, 410
// frames_expired, not retryable (its audit copy: `e2a replay <id>`).
//
// # What ingress calls
//
// Right after the publish of a request was acknowledged (these skip the
// existence lookup):
//
//	svc.ServeE2A(w, r, requestID)                   // negotiates SSE / NDJSON / JSON (?wait=true)
//	svc.Serve(w, r, requestID, format, newRenderer)  // any renderer, e.g. a protocol package's
//	svc.ServeFrom(ctx, w, requestID, format, from, newRenderer) // the same without an HTTP request (ACP over stdio, A2A message/send)
//
// For existing tasks (request ids from the E2A_TASKS index ingress keeps):
//
//	svc.ServeExisting(w, r, requestID, format, newRenderer) // a package's renderer, an unknown request answered not found
//	svc.LoadRequests(ctx, requestIDs)                        // envelopes and stored frames, for a task's view
//	svc.LoadRequestHead(ctx, requestID)                      // what the ownership rule reads of one request
//
// A task's view is made of what remains of its turns, oldest first to age
// out of E2A_RESPONSES: LoadRequests reads a turn whose first frames aged
// out from its first stored frame, and gives a turn answered whose frames
// all aged out (its pool's consumer acknowledged it) with none, both marked
// [StoredRequest.FramesExpired], not [ErrFramesExpired]; protocols/a2a
// leaves the latter out of the task and marks the task (metadata
// e2a_history_expired: true), [ErrFramesExpired] only when nothing of it
// remains. [Service.UnendedTurns] takes such a turn for ended.
//
// A protocol's answers that are values or events rather than a rendered
// stream (A2A's message/send result, tasks/get, the v1.0 bindings' events)
// are made by its package from neutral reads:
//
//	svc.OpenReader(ctx, requestID, from, opts...)   // a Reader with the service's wait limits
//	svc.OpenPrepared(ctx, requestID, from, opts...) // the same, taking over a prepared live subscription
//	svc.CancelTurns(ctx, requestIDs, cancel)        // a task's unended turns, newest first
//	svc.UnendedTurnsAwaited(ctx, requestIDs, within) // those turns, publishing ones awaited
//	svc.CancelRequest(ctx, requestID, cancel)       // one request; ErrNotCancelable if final
//
// cancel is a [CancelFunc] publishing the cancel on the control subject.
// This package imports no protocol SDK and no protocols/* package
// (internal/habits TestLayerImports): A2A's answers are package
// protocols/a2a's Answers (over host.TaskFrames, which a [Service] is),
// ACP's frame mapping is protocols/acp's. Errors are this package's
// sentinels; each protocol maps them to its JSON-RPC errors with its own
// table (A2A's and AgentVault's are package protocols/a2a's, ACP's
// protocols/acp's, all with the pipeline code as [ErrorData]). JSON-RPC
// answers are always HTTP 200 with the protocol's error codes.
// Every stream resumes from Last-Event-ID (the SSE id of the last event of
// a frame is its sequence) or ?from=.
//
// # Renderers
//
// A renderer (package render: render.Renderer, Start, Frame, Heartbeat,
// End) writes one output format to a render.Output; [Service.Stream]
// drives any renderer with a reader, so a new format is one renderer:
// E2A's [NewE2ASSE], [NewE2ANDJSON], [NewE2AJSON], and the renderers of
// the protocol packages (protocols/a2e, protocols/acp, protocols/a2a,
// protocols/a2av1), served with [Service.Serve], [Service.ServeExisting]
// or [Service.ServeFrom] and built on package render's toolkit (the
// Output, the SSE and NDJSON writers, the text fast path) with this
// package's [Classify], [Accepts] and [ResumePoint]. A renderer that
// reads frames' bytes where it can implements render.PassThrough: its
// reader decodes only each frame's head. One conformance suite runs each
// through the same scenarios built from the specification examples
// (package protocols/conformance: its Scenarios driven by its Run;
// render.HeadFrame gives a renderer's fast path a frame read without
// decode, [WrapE2A] the E2A renderers as the service wraps them), frame by
// frame against testdata/<renderer>/<scenario>.golden (go test ./egress
// -run Conformance -update rewrites egress's, go test
// ./protocols/<name> -update a protocol package's), including error,
// cancel, resume and not-found paths.
//
// The L3 projections (spec §12.1: each frame as ACP and A2A see it) are
// filled on request (?projections=true on the E2A endpoints), never read
// back, by the projector given with [WithProjections]
// (protocols.FillProjections).
package egress

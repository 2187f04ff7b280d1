// Package agent is the worker SDK of the E2A pipeline: it puts an agent on
// the pipeline. [Run] serves an agent pool with a [Handler]: it consumes
// request envelopes from E2A_REQUESTS (durable pull consumer agent-<pool>,
// subjects e2a.req.<pool>.>) and gives each handler a [Writer] that
// publishes the ordered response frames on e2a.resp.<request_id>.
//
// # Guarantees
//
//   - Work sharing: any number of processes serve a pool; each pulls only for
//     its free slots ([WithConcurrency]) and the consumer's MaxAckPending
//     bounds the pool ([WithMaxAckPending]). A request being handled is
//     reported in progress every heartbeat, so AckWait redelivers only the
//     requests of dead or stalled workers.
//   - Recovery: with the defaults (AckWait 4 s, a heartbeat every second)
//     the requests of a worker that died (killed, or its process or
//     connection lost) are redelivered within 4 s of its last heartbeat,
//     and another worker resumes them (see Redelivery): measured 3.9 s
//     from the kill to the first frame of the new worker
//     (TestWorkerKilledRecovers), 3.0–3.8 s for `e2a dev` killed and
//     restarted on its store. A live worker loses a request only after 3
//     heartbeats in a row were lost (a stall, or the consumer's leader
//     moving for longer than that): the takeover is fenced, so the frames
//     stay exactly once, but a handler that is not resumable ends with
//     agent_interrupted ([WithAckWait] sets the trade-off).
//   - Ordered, exactly-once frames: a request's frames are stored one
//     message in flight at a time, each message published with the stream
//     sequence of the one before as the expected last subject sequence (0
//     for the first); they carry no Nats-Msg-Id (the expected sequence
//     alone orders and fences them, and the server keeps no deduplication
//     entry per frame). A retry is recognised (the stored bytes are ours);
//     a message written by another worker fences this one out
//     ([ErrFenced]): its handler's context is cancelled and the delivery is
//     neither acked nor nacked (acks go by stream sequence and would end
//     the new owner's delivery). Text and reasoning deltas written faster
//     than frames are acknowledged are coalesced ([WithCoalesce]).
//   - Bursts: the frames written while a message is in flight wait, encoded,
//     and are stored together as the next message, a burst (header
//     E2A-Frames, the frames joined by line feeds: e2a.SplitBurst), fenced
//     as one frame is: the broker stores, republishes and audits one
//     message per acknowledgement instead of one per frame, on one replica
//     or three. A non-final [Writer.Write] returns once its frame is queued;
//     the final frame waits until it is stored, and [Sync] until every frame
//     written before it is (before an action that must not run twice).
//     A burst is bounded by the server's max_payload and by 256 frames
//     (burst.go). A handler with more of its answer at hand (an
//     upstream's bytes already read) may [Hold] its coalesced text until
//     its next write, so that an answer received at once is one message.
//     [MaxFrameBytes] tells a handler the largest frame the server takes,
//     so that it need not keep, for a final frame, what cannot fit one.
//   - Redelivery: the new worker reads the last stored message's last
//     frame. Final → ack.
//     Partial → a resumable handler ([WithResumable], [Resumer]) continues
//     after it ([Writer.ResumeAfter]); any other gets a final e2a.error
//     agent_interrupted, retryable. Never sequence 0 again.
//   - No request hangs: after MaxDeliver deliveries the consumer delivers
//     the request once more, and the worker that takes that delivery
//     (whenever one runs: a pool whose one worker the request killed too)
//     writes a final e2a.error max_deliveries without running the handler;
//     the server's max-deliveries advisory closes it should that worker die
//     too. A request past its deadline (envelope "deadline" or
//     [WithDefaultDeadline]) gets deadline_exceeded, retryable only when
//     the default deadline was the earlier (a retry may land on a faster
//     worker; the envelope's own fails the same way again); both fenced
//     like any frame, so they can never follow a real final frame.
//   - Cancellation: [Cancel] stores a cancel on e2a.ctl.<request_id>
//     (E2A_CONTROL keeps the last one), delivered live to every worker; a
//     request cancelled before its pick-up gets the final frame without a
//     Serve call (the worker remembers the cancels it received, and reads
//     the stored one for a request stored before it could have received
//     them: at start-up, after a reconnect or a dropped message); when that
//     pick-up is a redelivery (the request's earlier worker died or
//     stalled, and may have started work that runs on), a handler
//     implementing [RequestCanceller] is told first, bounded by
//     [CancelRequestTimeout] (its error or panic is logged; the request
//     ends cancelled all the same), as it is for a redelivery past its
//     deadline at its pick-up (which ends deadline_exceeded); while the
//     handler runs, its context is cancelled ([ErrCancelled]) and the final
//     frame is e2a.error cancelled. A cancel the worker's subscription missed
//     (published while it was reconnecting, or a dropped message) is read
//     from the store for every request it holds, running or waiting for its
//     turn, at the first heartbeat after the reconnect or the drop; and,
//     for a cancel a cluster's route did not forward yet (the server it was
//     published on had not learnt of the subscription), each held request
//     reads its stored cancel one heartbeat after its pick-up, then at
//     doubling intervals up to 15 s (missed.go); a turn that waited for the
//     turn before it reads its stored cancel once more before it runs
//     (turns.go). A cancel received or stored
//     more than a minute before the request was stored is an earlier
//     request's under the same id (its envelope aged out, its cancel stayed):
//     it is ignored, at pick-up and at those reads, and logged (compared by
//     JetStream's timestamps; cancels.go). A cancel turn (the cancel of a task whose last turn ended
//     interrupted) ends cancelled without a Serve call; a handler
//     implementing [TurnCanceller] is told of it first (its error or panic
//     is recorded in the final frame's details).
//   - Turns never overlap: a request whose message carries E2A-After-Request
//     (ingress sets it on a later turn of an A2A or AgentVault task or of an
//     ACP session: the request the record held before it) runs its handler
//     only once that request's final frame is stored, whatever it says
//     (completed, failed, cancelled, interrupted). The wait is on
//     e2a.live.<id>, with reads of the stored frames backing off from
//     250 ms to 5 s (turns.go). While it waits the request is held like a
//     running one: heartbeats keep its delivery; a cancel or its deadline
//     (counted from when it was stored: the wait counts) ends it with its
//     final frame and no handler call, stored once the request it waits
//     for has ended (a task's turns end in the order they run); a
//     shutdown hands it back. Its
//     [WithConcurrency] slot is given back while it waits (a turn picked up
//     before the one it waits for never keeps that one from being pulled)
//     and taken again once that one has ended, from the slots a pull in
//     flight holds for requests not delivered yet when none is free (a
//     request that pull then delivers waits for a slot, heartbeated), so a
//     turn after one that ran on another process starts at once; its
//     delivery stays unacknowledged meanwhile: waiting turns count against
//     the pool's MaxAckPending ([WithMaxAckPending]), which must stay above
//     the number of turns that may wait at once, or the turns they wait for
//     are never delivered (ingress bounds the turns waiting on one task or
//     session, E2A_MAX_WAITING_TURNS: keep the pool's concurrency × (that
//     bound + 1) under MaxAckPending). A named request not stored is waited for until
//     15 s after this one was stored (its publish may still be in flight),
//     then not; one of the pool acknowledged with no frame left (its frames
//     aged out) is not waited for. A request of a task or a session
//     cancelled, or past its deadline, while its handler runs gets its
//     final frame once the handler has returned, at most [StopGrace]
//     after (the writer refuses
//     its writes from the cancel on), so the next turn never starts beside
//     a handler still cleaning up; one that takes longer is logged.
//   - A handler's panic or error becomes a final e2a.error; the process keeps
//     serving. A handler goroutine ended by runtime.Goexit counts as a panic.
//     A final frame of the runtime refused before publishing (an
//     [Error]'s Details that do not encode as JSON; echoed ids that make
//     every frame of the request exceed max_payload) is written without its
//     details, then, if still refused, with the request id as its only
//     echoed id: it would be refused again at every redelivery.
//   - Graceful shutdown: when Run's context is done it stops pulling, lets
//     in-flight requests finish within the drain timeout, then hands the
//     others back (Nak) for another worker to resume.
//
// Every subject comes from package subjects; the consumer definition from
// package streams. Metrics (e2a_agent_*) are registered with [WithMetrics].
package agent

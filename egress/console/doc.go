// Package console is the web console of the E2A pipeline, served by egress
// at /console: a list of recent requests with filters, one request's frames
// live or replayed, and live counters per stage. Its page is plain HTML,
// CSS and JavaScript embedded in the binary (assets/, go:embed): there is
// no front-end build, so `go run ./cmd/e2a dev` needs nothing else.
//
//	con, err := console.New(ctx, nc, egressService,
//		console.WithStreamsConfig(cfg), console.WithRegisterer(reg), console.WithGatherer(reg),
//		console.WithAuth(authFunc), console.WithDemo(mux, "demo"))
//	con.Register(mux) // GET /console, /console/assets/…, /console/api/…
//
// Options validate their values: a bad one makes New return an error
// wrapping ErrInvalidOption.
//
// # The index
//
// The list is read from the index stream KV_E2A_INDEX (named after the
// key-value bucket E2A_INDEX it was in earlier builds, so that the stages'
// NATS permissions stay), which an indexer in every egress process keeps up
// to date; a page never scans E2A_REQUESTS or E2A_RESPONSES. The index
// keeps no subject per request (a NATS server's memory grows with the
// subjects it holds): its subjects are shared, at most MaxIndexSubjects.
//
//   - One durable pull consumer, console-index-requests-v2 on
//     E2A_REQUESTS, is shared by all egress processes: each request is
//     indexed by one of them. It reads continuously and indexes in batches
//     of up to 256 messages (a batch closes after 5 ms without a message,
//     at most 50 ms after its first), each message acknowledged once its
//     batch is indexed (explicit acks): indexing trails the stream by
//     milliseconds, and a batch fetched by a process that stops before
//     indexing it is delivered again after the ack wait (30 s). Created the
//     first time with a start time one TTL ago, or after the ack floor of
//     console-index-requests, the consumer of earlier builds, whose
//     one ack-all per batch acknowledged, for every process sharing it,
//     what another process had fetched and not indexed; the server removes
//     either after one TTL without any reader (InactiveThreshold). (Earlier builds also consumed E2A_RESPONSES into
//     a progress key per request; that consumer, console-index-responses,
//     is no longer read and the server removes it after one TTL.)
//   - A request writes its record (time, pool, protocol = provenance
//     details.ingress_protocol, else source_protocol, with "/v" and
//     details.a2a_version for an A2A call that names it: a2a/v1.0,
//     a2a/v0.3; method, principal = user_id, task, session, context,
//     channel) once on q.<u>, u = the first 3 hex digits of SHA-256 of its
//     user_id (4,096 subjects at most), with its E2A_REQUESTS sequence as
//     Nats-Msg-Id (a batch delivered again is not indexed twice); then, for
//     each of task_id, session_id and context_id that is set, a pointer
//     {"v": id, "s": the record's sequence, "o": the record's principal} on
//     x.<field>.<h>, h = the first 3 hex digits of SHA-256 of the id
//     (pointers of earlier builds have no "o"). The writes of a batch are
//     asynchronous publishes, records first in the order of E2A_REQUESTS
//     (so records sit in the stream in that order), then the pointers.
//   - Frames are not indexed. A row's progress (status pending / running /
//     succeeded / failed, frame count, first frame time, end time, error
//     code) is read from the request's frames when a page shows it: its
//     last stored message (direct get last by subject), whose last frame
//     counts when it holds a burst of frames (E2A-Frames), and, when it
//     does not hold frame 0, its first message (direct get by subject from
//     sequence 1). A request of which no frame is stored shows as pending
//     unless it was answered all the same: its pool's consumer
//     acknowledged it (the agent does so only once its final frame is
//     stored; the consumer's ack floor, cached a few seconds, and the
//     responses stream's leader confirming no frame is left: egress's
//     Service.AnswerAgedOut). Its frames aged out or were evicted (a full
//     E2A_RESPONSES drops the oldest): it shows as expired, its answer no
//     longer held (`e2a replay <id>` reads its audit copy).
//   - A row's status is its own turn's: an interrupted turn
//     (input-required, auth-required) stays so once the client answered.
//     Such a row of a task also carries task_latest, the task's newest
//     turn and its status (the task's current state) when that is a later
//     request of the same principal: a list of the task's pointers (a page
//     of one), read for interrupted rows only, in the list and in a
//     request's detail.
//   - The index is best effort: a failed update is counted
//     (e2a_console_index_errors_total) and logged, and its batch published
//     again (an ack the index stream never sent times out after 10 s; the
//     stream drops the copies it stored, by message id) for up to a minute
//     before it is skipped; the streams stay the truth, and opening a
//     request reads the streams, not the index.
//
// # Listing without a scan per page
//
// A request record is written once and never updated, so the index
// stream holds the q.* records in request order. A page is read
// newest first, from a cursor (a stream sequence) downwards, with batched
// direct gets filtered by subject (streams.DirectGetBatch): no consumer is
// created per page, any replica can answer, and the cost is the page size
// plus the progress of each row (one or two direct gets on E2A_RESPONSES,
// 16 rows in parallel).
// request_id is one direct get of the envelope in E2A_REQUESTS (the index
// is not read). user walks the records of the user's bucket; task, session
// and context walk the pointers of the id's bucket and read each matching
// record by sequence: they cost the page, plus the rows of other users or
// ids that share the bucket (skipped, counted by the scan budget, not in
// the page's scanned count, which holds only the list's user's keys, so
// that it tells nothing of others' ids nor when they were used). A pointer
// naming another principal than the one the list is for is skipped without
// reading its record, so a search by another principal's id reads what one
// by an unused id of the bucket reads (a pointer of an earlier build, with
// no owner, still has its record read, its principal checked); the most
// selective one is walked and the others, status and the time range are
// checked on the rows. Until is found by a binary search
// on stored times (a few direct gets), a minute after it (the indexing
// delay): a request indexed more than a minute late (the index's writer
// down or behind that long) is missed by until, though listed without it;
// since stops the walk. Only filters
// that no secondary key serves (status alone, or a second id filter) may
// examine many keys: a call examines at most DefaultScanBudget keys
// (other principals' included, uncounted in scanned: see Page.Partial) and
// then answers with what it found, Partial, and the cursor to go on from.
// With several egress processes indexing in parallel, batches of requests a
// few hundred milliseconds apart may interleave in the list. A bad
// parameter (an unknown status, a time that does not parse, until before
// since, a before that is no number, a limit below 1) is 400 bad_request,
// whatever user the list names: one naming another principal (not the
// audit or admin role) is otherwise an empty page, its work none. Every
// API call's query is read whole: one that is no URL-encoded form
// (?status=fai%zzled, a semicolon between parameters) or that gives a
// parameter twice with different values is 400 bad_request, as ingress
// refuses it at every door (its unreadable pairs were dropped, and with
// them the filter or resume point the client named).
//
// # Sizes
//
// Messages live one TTL (default: ResponsesMaxAge, 24 h in development,
// since a request whose frames are gone cannot be opened anyway): the
// stream is bounded in time. A request costs one record of about 300 bytes
// and up to three pointers of about 60; the subjects stay at most
// MaxIndexSubjects (16,384) whatever the rate and the TTL, so the index
// adds no per-request term to a NATS server's memory (docs/capacity.md,
// Subjects per request).
//
// # One request
//
// GET /console/api/requests/{id}/stream is egress's own GET
// /v1/requests/{id}/stream (E2A SSE, resumable with Last-Event-ID or
// ?from=N), mounted under the console's auth, because a browser cannot put
// an API key on an EventSource. (A request whose id is "." or ".." is
// asked for as /console/api/request?id= and /console/api/request/stream?id=:
// a browser resolves such a path segment, escaped or not, as a dot
// segment.) GET /console/api/requests/{id}, the request's detail (its
// envelope, without secrets, and its index entry), is read from the hot
// streams, else, as egress's GET /v1/requests/{id} answers it, from the
// audit history (egress.WithHistory; "history": true, no entry), to the
// principal the envelope's owner allows: another principal's request is
// answered as an unknown one (404), and a failed history lookup 503,
// retryable (the page asks for a detail answered so, or not answered,
// again 3 s later, as it asks for the stream). The page keeps the frames it showed in
// sessionStorage (written at most once a second, at the final frame and
// when the page is left; up to 2,000 frames or 2 million characters per
// request), under the signed-in principal (another one signing in in that
// tab is not shown them; signing out forgets them all): after a reload it
// shows them again and resumes the stream from the next sequence,
// dropping any frame it already has. A stream egress ends with a
// retryable error (timeout: no frame within its wait limits, as for a pool
// whose worker has not started; unavailable) is asked for again 3 s later,
// from the next sequence (twice as long after each such end without a
// frame, up to a minute); another error ends the view, as does a stream
// refused with an error that is not retryable (410 frames_expired: its
// frames are no longer held; the message names `e2a replay`), said as
// such. Frames are
// rendered as text, reasoning, tool calls with their arguments and results
// (joined by call id; arguments or a result sent as JSON text, as the trpc
// interaction spec and OpenAI write them, shown as the JSON they hold),
// completions and errors; every raw frame and the raw
// envelope are one click away, and the page shows the `e2a replay --request
// <id>` command that prints them from the durable streams.
//
// # Counters
//
// GET /console/api/stats gathers the process's metric registry (requests/s,
// in flight, errors of ingress, agent, egress and the indexer, with rates
// over at least a second) and reads the consumers of E2A_REQUESTS and
// E2A_RESPONSES (lag = messages not yet delivered: agent-<pool> for the
// agents, the two index consumers for the index). In a deployment with one
// stage per process the counters are this egress process's; the consumer
// and stream figures are shared. They are the deployment's (every
// principal's requests, every pool and its upstream), so they answer only
// a principal that sees every principal's requests (the audit or admin
// role, or everyone with auth off); anyone else gets 403, and the session
// (its "stats" field) tells the page to show no counters.
//
// # Push notifications
//
// With [WithPushView] (cmd/e2a passes the push store's Deliveries), GET
// /console/api/tasks/{task}/push answers the push notification configs of
// a task and their delivery state ([TaskPush]), for the task's owner only
// (another principal's task lists no config; the audit and admin roles
// name the owner with ?user=); a request's detail shows them for its task.
// (The page asks for the task "." or ".." as /console/api/task/push?id=,
// as it asks for such a request.)
// Only the webhook's host is shown, never its path, query, token or
// credentials.
//
// # Secrets and auth
//
// Envelopes were stripped of secrets by the normalizer before they were
// published; the console still drops the auth object whole and replaces the
// value of every key naming a secret ([IsSecretKey]) in what it shows, and
// the page does the same for raw frames. With [WithAuth], the page and every
// API need the same credential as the other endpoints (X-Api-Key or
// Authorization: Bearer; a refused one is answered with what a client
// reads of the refusal, egress.ClientMessage, and, after too many failed
// ones from its address, 429 with Retry-After and a message saying when
// to retry); a person signs in once and the credential is kept
// in HttpOnly, SameSite=Strict cookies scoped to /console (Secure over
// TLS or behind a proxy sending X-Forwarded-Proto: https) for 12 hours:
// e2a_console, and for a long one (a bearer token with many claims)
// e2a_console_1 to e2a_console_3, each within the 4,096 bytes of name and
// value a browser keeps (the secret as it is when it is all cookie
// characters, as a JWT is, else in base64url). They are read back whole
// on each request, checked like a header (a set that is not whole, one
// missing or one too many, is no sign-in) and removed from the request
// (its Cookie header) before any handler runs. With optional auth (the scheme none beside
// others: ingress/AUTH.md) a visitor without a credential is the anonymous
// principal, served the page as such, which offers the sign-in form
// (GET /console/login) to a person with a credential, and signing out
// leads back to it. No state is kept on the server: signing out
// removes the cookies from the browser, and a copy of them stays valid as
// long as its credential does. POSTs need the X-E2A-Console header (no
// cross-site form can send it). A sign-in's body is at most 32 KiB, its
// secret 12,243 bytes (what four cookies hold in base64url: a longer one
// is refused, not dropped by the browser unsaid; four keep the Cookie
// header each console request carries within 16.4 KB, about what proxies
// take), a demo request's body (POST /console/api/demo) 64
// KiB: a larger one is answered 413 body_too_large, saying so. Every console answer is nosniff,
// no-referrer and may not be framed; the page runs under a strict
// Content-Security-Policy (its own script and style sheet only), every
// other answer under one that lets nothing load or run, and API answers
// are no-store. The page renders stored content as text only.
package console

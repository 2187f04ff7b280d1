// Package push delivers A2A push notifications durably: every update of a
// task with push notification configs is POSTed to each config's webhook,
// in the task's order, at least once, through crashes of the stage, from
// the response frames JetStream already holds.
//
// # Configs (Store)
//
// A [Store] keeps configs in the E2A_PUSH bucket, one key per principal
// and task ("cfg.<principal>.<task>", encoded tokens) holding that task's
// configs, so every read, list, replace and delete is scoped to the
// caller's principal (the envelope user_id): another principal's config
// is ErrNotFound, like one that does not exist (the A2A layers answer it
// with TaskNotFoundError's code and [NotFoundMessage], which names the
// config, not the task). Keys expire with the
// tasks (the bucket's TTL is streams.Config.TasksTTL; [Store.Keep] writes
// a task's again while a turn of it runs). Limits: configs
// per task (WithMaxPerTask), the bytes of a task's configs (their JSON
// unsealed, 8 KiB a config on average: 80 KiB by default, at least
// 40 KiB, so that one principal's configs cannot fill E2A_PUSH for every
// other) and tasks with configs per principal
// (WithMaxTasksPerPrincipal, counted across replicas by a compare-and-set
// of the principal's "slots.<principal>" key: creates racing on any
// number of replicas pass exactly up to the limit), ErrLimit. [Store.Create] checks the URL
// before storing (ErrURLRefused): https, or http to a host of the
// allow-list (E2A_PUSH_ALLOW_HOSTS, [WithAllowHosts]); no user
// information; a port of 1..65535; every address the host resolves to passes the workflow
// executor's address rules (no loopback, private, link-local, metadata,
// multicast, reserved or unspecified address; IPv6 in 2000::/3 only:
// internal/outbound.Special) unless the host is allow-listed. A host
// that does not resolve and one that resolves to a refused address get
// the same error, naming neither (the detail is logged at debug level). A config carries its A2A generation ([V1], [V03]):
// [FromV1], [FromV03], [Config.V1] and [Config.V03] convert the SDKs'
// types. The token and credentials are stored in the bucket and sent to
// the webhook only: never logged, never dead-lettered.
//
// The A2A layer calls, with the caller's principal, after checking that
// the task is the caller's in its task store:
//
//	Create(ctx, principal, push.FromV1(cfg)) / Create(ctx, principal, push.FromV03(cfg))
//	Get(ctx, principal, taskID, id)
//	List(ctx, principal, taskID, pageSize, pageToken)
//	Delete(ctx, principal, taskID, id)
//
// and for a config inline in SendMessage (configuration's
// taskPushNotificationConfig / pushNotificationConfig) Create before the
// request is published, so its first frame is delivered.
//
// # Delivery (Run)
//
// [Store.Deliveries] gives the console each config's state: the
// webhook's host, the last update handled, the failure being retried,
// dead-letter mode and the dead letters (never the URL's path or query,
// the token or the credentials).
//
// [Run] is one replica of the stage (`e2a push`, also in `e2a dev`, and
// in `e2a serve` with E2A_PUSH=on). Replicas share one durable consumer on
// E2A_RESPONSES (e2a.resp.*), which starts, when first made, after the
// last message stored before the oldest stored config was made. For each stored response message it reads the request's
// envelope (principal and task) and the task's configs: its principal's,
// and for an admin's turn of another principal's task the owner's
// (e2a.Envelope.Owner, set by ingress: the turn is that principal's
// task's); a message of a task without configs is acked at once. Otherwise the message's frames
// are mapped to task updates by the A2A mapper the streaming bindings use
// (protocols/a2a/a2amap, written as it is): A2A v1.0 StreamResponse
// JSON for V1 configs; for V03 ones the A2A v0.3 Task as tasks/get
// answers it once the update's frame is stored (a2amap.BuildTask, in v0.3, over the
// task's turns, found by E2A-After-Request: a turn that is another
// principal's or task's, its id taken again, ends them), what the v0.3
// SDKs' senders post after each event. A turn's final status that a turn
// queued behind it takes back (the task's record lists a later turn of
// the same principal and task: WithTaskTurns) is posted as a turn's
// stream writes it: submitted, not terminal, and for V03 the Task as
// tasks/get answers while that turn waits (unless that turn has a message
// stored before this one, or the record cannot be read: then as the
// frame says; a turn recorded and not stored is waited for up to the
// publish timeout and a second: host.AwaitPublish). The mapper is fed the request's earlier
// frames when this replica has not seen them, so an update's id
// (E2A-Event-Id: <request_id>:<frame sequence>:<n>) and body are the same
// whichever replica renders it.
//
// Each config has a lane in a replica (its updates one after another) and
// a cursor in the bucket: the last update handled, written after each
// one. A message is delivered to a config only when it is the config's
// next one (the request's next message after the cursor, or the first
// message of the task's next request after the previous request's final
// frame, or the first message stored after the config was made); an
// earlier one still in flight elsewhere makes it wait (WithOrderWait).
// Lanes are independent: a slow or failing webhook delays only its own
// config. The message is acked when every config is done with it; it is
// kept in progress while a webhook answers.
//
// A config that cannot take a message now (its webhook backs off, the
// message is not its next one yet, its lane has a POST in flight and 4
// messages queued, or drains it) is parked: its cursor names the first
// and the last of the task's turns it has left to handle (the turns
// between found by E2A-After-Request, so the cursor stays a few KiB
// whatever the number of turns parked), the message is done for it, and
// a wake-up key in E2A_PUSH (wake.<cursor key>) is read by a second
// durable consumer (<consumer>-wake, on the bucket's stream), nak'd until
// the webhook's next attempt. The replica that takes the wake-up drains
// the config in its lane: it reads the messages back from E2A_RESPONSES
// after the cursor, renders them as above, delivers them in order, and
// un-parks the config (compare-and-set on the cursor) when nothing is
// left. A drain does not post while a lane's POST begun before the park
// may be in flight (the cursor's settle time, cleared by that lane's
// write; none when the message parked is the one the cursor waits for;
// not waited for once the consumer has acked every message up to the
// backlog's and the drain's next: lanesDone), nor while another replica's drain holds the config (the
// cursor's drainer, a POST timeout ahead). A message the consumer may
// have given another replica too (redelivered, or taken by intake a
// third of the ack wait or more after it was stored: its ack wait may
// have run out while it waited in the client's pull buffer) has each of
// its POSTs claimed in the cursor first (the replica's id, a POST
// timeout ahead, cleared by the write after the POST); a lane or drain
// of another replica does not post while the claim holds, so two live
// replicas post each update once (docs/push.md has the counts). While it
// is parked the consumer's messages for it only move its
// backlog's ends (a turn after a gap, its previous turn never stored or
// another tenant's, starts a chain of the backlog's own: cursor.Ends).
// So a config holds at most 5 of the shared consumer's messages, only
// while one of its POSTs is in flight, and none once parked: one
// tenant's failing or hanging webhooks cannot fill the consumer's
// MaxAckPending and stop the others' deliveries. A state that cannot be
// written at all (a server's max_payload under a few KiB) skips the
// update for that config, with an error logged and counted, rather than
// holding the message; in a drain it skips the config's backlog left and
// un-parks it, rather than posting the same update again and again.
//
// A direct get of E2A_RESPONSES may be answered by a replica behind the
// stream's leader: what it finds is taken, but every absence the stage
// acts on (a turn over, a turn with nothing after the config or the
// cursor, the end of the messages read back for a mapper or a v0.3
// Task) is confirmed by the leader first (streams.LeaderLastBySubject,
// streams.LeaderNextBySubject). A config's start and its cursor name
// the E2A_RESPONSES their sequences are of (its creation time): the
// stream made again under the stage (removed and applied again, lost by
// a cluster), numbering its messages from 1 again, is one where the
// config starts at its first message; in one restored from a backup of
// it, the backup's messages keep their sequences and the positions stand
// up to the last of them (rebind.go), also when the restore kept the
// stream's creation time (a backup of a server before 2.15: a message
// stored later than a position's message at a sequence not after it
// shows the stream went back).
//
// A 2xx is delivered; a 3xx (redirects are not followed, so no retry
// would deliver it) or another 4xx than 408, 410 and 429 is permanent
// (the update is dead-lettered at once, the next ones go on). A 410 Gone
// ends the subscription (REST Hooks' convention): the config is deleted
// as [Store.Delete] deletes it (so every replica stops posting to it),
// unless it was set again under its id since; the update is neither
// retried nor dead-lettered, the deletion logged (the webhook's host
// only) and counted. Anything else
// (5xx, 408, 429, connection errors, timeouts) is transient: retried
// with exponential backoff and jitter (WithBackoff), honouring
// Retry-After, for the retry window
// (WithRetryWindow, default 24 h) from the first failure. Past it the
// update and every later one of the config go to the E2A_PUSH_DEAD stream
// in order, until [Redeliver] posts them again (`e2a push redeliver`) and
// the config leaves dead-letter mode. [ListDead] lists them. An update
// over WithMaxBody can never be posted as it is: it is dead-lettered at
// once without its body (its size and [ReasonTooLarge] kept), and a
// redelivery skips it. E2A_PUSH_DEAD is shared by every principal: once
// it is over half full, a principal over its share of it (WithDeadShare,
// 1/8) loses its own oldest dead letters, not another's (deadshare.go).
//
// Each POST applies the URL's scheme, host and port rules again (an http
// URL stored while the allow-list named its host is refused for good
// once it does not), and each connection resolves the webhook's host itself and connects only to
// an address that passes the rules (pinned for the connection: DNS cannot
// move it to a private address after the check); bodies are bounded
// (WithMaxBody) and every POST has a timeout (WithTimeout), which ends
// the read of its answer too, a 101 Switching Protocols' included.
//
// # Signing
//
// With a [Signer] ([WithSigner]; `e2a` loads E2A_PUSH_SIGNING_KEY, an
// Ed25519 PKCS #8 PEM file) every POST carries E2A-Signature, a detached
// JWS (RFC 7515 appendix F, alg EdDSA) over the body as sent, its
// protected header naming the key (kid, the RFC 7638 thumbprint) and the
// event (eid). Detached so the body stays the A2A JSON receivers parse.
// The Signer serves its public key as a JWK Set (ingress mounts it at
// [JWKSPath]); a receiver verifies with any JOSE library. The private key
// is never logged or published.
//
// Metrics: e2a_push_delivered_total, e2a_push_retried_total,
// e2a_push_failed_total, e2a_push_dead_lettered_total,
// e2a_push_dead_purged_total (removed to keep a principal within its
// share of E2A_PUSH_DEAD),
// e2a_push_rendered_total, e2a_push_skipped_total (state that cannot be
// written), e2a_push_gone_total (configs deleted on a 410 Gone) and
// e2a_push_lag_seconds (frame to 2xx).
//
// Tracing (internal/tracing, when on): each POST is a client span "push
// POST", child of the trace context of the response frame it renders, so
// it sits in the request's trace; it records the request id, event id,
// config id, status and outcome (delivered; retry; gone, a 410 Gone
// ending the config; refused, another permanent failure), never the URL,
// token or credentials.
package push

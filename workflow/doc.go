// Package workflow is the A2E workflow executor (a2e-workflow-protocol.md):
// it parses, validates and runs declarative JSONL workflows, as the agent
// pool "workflow" on the agent/ SDK, and serves the A2E REST API for the
// ingress to mount.
//
// # Entry points
//
//   - [Parse] reads the JSONL (operationUpdate lines, then one
//     beginExecution) and checks structure; [Validate] adds the data-flow
//     checks without a policy; [Executor.Validate] does everything,
//     including permissions. Every [Issue] has its line, operationId (when
//     one is concerned), the property in dotted form and a code; the answer
//     is a [ValidationResult] {valid, errors, warnings}. An executor with
//     [Options.ValidateOnly] validates for the one that runs the workflow
//     (`e2a serve` for the workflow pool): it leaves the operation
//     permissions, the API knowledge base, the credentials and the limits
//     a policy sets per principal to it (ValidationResult.Deferred), and [API]'s execute answers that
//     executor's refusal as its own (403 PermissionError, 400
//     ValidationError). [API]'s validate and execute both hold
//     MaxWorkflowBytes against the text an execution publishes (the
//     envelope's, [WorkflowText]), which the worker measures.
//   - [New] builds an [Executor] from [Options]; [Executor.Execute] runs a
//     validated [Workflow] and reports [Event]s to an [Observer];
//     [Executor.Serve] is the agent.Handler of pool [Pool] for envelopes
//     with method [Method] and params.workflow (JSONL text, or an array of
//     message objects). Run it with agent.Run(ctx, nc, workflow.Pool, exec).
//   - [API] serves GET /health, GET /api/v1/capabilities, POST
//     /api/v1/workflows/validate, POST /api/v1/workflows/execute, GET
//     /api/v1/executions/{id} and GET /api/v1/rate-limit/status ([Paths])
//     through [API.Register], or as the routes the pipeline's protocol
//     registry mounts ([Routes], over a host that is a [Host]); publishing, frame reading, task lookup, rate limits
//     and authentication are plugged in through [Submitter], [FrameSource]
//     (e.g. [StreamFrames]), [TaskLookup], [RateLimits] and
//     API.Authenticate.
//   - [ConfigFromEnv] and [Config.Options] read the E2A_WORKFLOW_*
//     environment.
//
// # Data model and paths
//
// Each execution has one JSON object, /workflow. Paths are
// /workflow/key, /workflow/a[0], /workflow/a.b, /workflow/a[0].b; "/" and
// "." both separate properties. A missing path read by an operation is a
// DataError (a Conditional reads it as null). Fields inside elements
// (FilterData field, sort field, …) use the same syntax without the
// prefix ("address.city", "tags[0]"; "" is the element itself). Strings may
// reference the data model with {/workflow/...}: a string that is exactly
// one reference takes the referenced value with its type (bodies,
// condition values); references inside text are rendered as text. In an
// ApiCall url, references may only follow the host and are escaped (path
// segment or query value), so the destination is known at validation.
//
// # Operations
//
//   - ApiCall {method, url, headers, body, outputPath, timeout}: headers are
//     strings or {"credentialRef":{"id":…}, "prefix":"Bearer "} (prefix is
//     an extension). The parsed response (JSON, else text) is stored at
//     outputPath. Host, Content-Length, Transfer-Encoding and other framing
//     headers cannot be set; a value (or prefix) with a line break or
//     another control character but the tab is a validation error, a
//     reference resolving to one the operation's DataError. Each attempt
//     sends the request's W3C trace context (traceparent, tracestate),
//     unless the workflow sets a traceparent header: with tracing on that
//     of the attempt's client span (under the worker's process span), else
//     the request's own (agent.TraceFrom).
//   - FilterData {inputPath, conditions[{field, operator, value}],
//     outputPath}: conditions are ANDed; operators == != > < >= <= in
//     contains startsWith endsWith (see evalOperator in ops.go): equality is
//     deep, numbers by value; ordering compares numbers (a numeric string
//     against a number too) or strings; a comparison that makes no sense is
//     false.
//   - TransformData {inputPath, transform, config, outputPath}:
//     map: config {field} plucks; {fields: {out: "src.path"}} reshapes;
//     {fn, field?, target?} applies toUpperCase, toLowerCase, trim, length,
//     toString, toNumber, round, floor, ceil, abs or not; {set: {k: v}}
//     adds constants. sort: {field, order asc|desc}, stable, nulls last.
//     group: {field} → {key: [elements]}. aggregate: {operation
//     count|sum|avg|min|max, field} → a value, or {aggregations: [{operation,
//     field, as}]} → an object, either with {groupBy} → {key: …}.
//     select: {fields: [...]} keeps those (nested) fields of each element
//     (or of one object).
//   - Conditional {condition {path, operator, value}, ifTrue, ifFalse}: runs
//     the listed operations; result {condition, branch, executed}.
//   - Loop {inputPath, operations, outputPath?}: runs the operations once
//     per element with /workflow/_loop/item and /workflow/_loop/index set
//     (the key _loop is reserved); outputPath receives, per iteration, the
//     result of the last listed operation.
//   - StoreData {inputPath, storage, key}: localStorage → KV bucket
//     Stores.Local, key "<principal>.<key>"; sessionStorage → KV bucket
//     Stores.Session, key "<principal>.<request id>.<key>" (give it a short
//     MaxAge); file → "<principal>/<key>" under Stores.Dir, opened with
//     os.Root so nothing escapes (E2A_WORKFLOW_FILE_DIR; unset:
//     [DefaultFileDir], a 0700 directory in the user's cache directory;
//     "off" disables it; `e2a agent --pool workflow` and `e2a dev` refuse
//     to start when a set one is not an existing directory). Keys: letters, digits, _ = - . /, no "..".
//     Values are JSON, at most Limits.MaxStoreBytes. Unconfigured storage
//     types are refused at validation. localStorage has a quota per
//     principal (Stores.LocalQuota, E2A_WORKFLOW_LOCAL_QUOTA_BYTES; by
//     default a quarter of the bucket's MaxBytes), counted in the bucket by
//     compare-and-set so that every worker shares it: past it StoreData
//     fails an ExecutionError, not retryable, details.limit
//     "localStorageQuota"; a full bucket (the principals together) fails
//     details.limit "storageFull", not retryable for localStorage (nothing
//     in it expires), without the server's words. sessionStorage has a
//     quota per principal too (Stores.SessionQuota,
//     E2A_WORKFLOW_SESSION_QUOTA_BYTES; same default) of the bytes written
//     within the bucket's TTL, as its keys expire without a write (see
//     sessionquota.go): details.limit "sessionStorageQuota".
//   - Wait {duration ms}: sleeps on the executor's [Clock].
//   - MergeData {sources, strategy, outputPath}: concat, union (deep-equal
//     duplicates removed), intersect (elements of the first source in all
//     others), deepMerge (objects key by key, arrays index by index, later
//     scalars win).
//
// Execution is sequential in operationOrder and stops at the first failed
// operation, unless Options.ContinueOnError (E2A_WORKFLOW_CONTINUE_ON_ERROR)
// says to run the rest: the outcome is then failed, with every failure in
// error.details.failedOperations. results holds each operation's output by
// operationId.
//
// # Security
//
//   - API knowledge base ([Policy]): rules of host[:port] patterns, methods,
//     paths and principals, from E2A_WORKFLOW_POLICY_FILE, plus
//     E2A_WORKFLOW_ALLOWED_HOSTS for everyone. Checked at validation (host,
//     method, static path) and again before each request and each redirect.
//     A path with a "." or ".." segment, plain or percent-encoded (from the
//     url's text or a reference), or delimited by an encoded / or \ (a
//     referenced "../admin" is sent as ..%2Fadmin), is refused: a server
//     resolving it would serve a path the rules did not allow.
//   - SSRF: the dialer resolves the host itself, refuses loopback, private,
//     link-local, CGNAT, multicast, unspecified and documentation addresses
//     (IPv4-mapped IPv6 unwrapped) and connects to the address it checked.
//     Such addresses are allowed only in E2A_WORKFLOW_ALLOWED_NETS, or when
//     the URL names an IP literal that a rule of the calling principal
//     names exactly, port included when the pattern has one (e.g. allowing
//     "127.0.0.1:8080" for a local test API; "*" does not open it). No
//     proxy from the environment. Redirects (at most 5) are re-checked;
//     credential headers are dropped when a redirect changes host, port or
//     scheme.
//   - Response bodies are capped (Limits.MaxResponseBytes, default 1 MiB):
//     a larger 2xx body is a DataError; a non-2xx answer is judged by its
//     status whatever its size (a 5xx error page stays retryable), with a
//     redacted snippet of its body in details.response.
//   - Credentials are stored encrypted (spec §7): with vault keys
//     (E2A_WORKFLOW_VAULT_KEYS, base64 32-byte keys, comma-separated, or
//     E2A_WORKFLOW_VAULT_KEY_FILE, one a line) every stored value must be
//     sealed, "a2e-sealed:v1:<key id>:<base64url>" (AES-256-GCM from the
//     standard library, the credential id as additional data, so a value
//     cannot be moved to another id); plaintext values are
//     ErrPlaintextCredential. Seal with `e2a vault
//     seal <id>` (value on stdin) or a whole file with `e2a vault rotate
//     <file>`. Rotation: put the new key first (the first seals, all open),
//     restart or run `e2a vault rotate`, which re-seals every value with the
//     new key, then remove the old key. Without keys the vault reads
//     plaintext (development) and logs a warning.
//   - Credentials ([Vault]: E2A_WORKFLOW_CREDENTIALS_FILE and
//     E2A_WORKFLOW_CREDENTIAL_<NAME>) are resolved only inside the worker,
//     per principal and optionally bound to hosts (an environment
//     credential by E2A_WORKFLOW_CREDHOSTS_<NAME>, host patterns
//     comma-separated). A credential is injected only into https
//     calls, or plain http ones to a loopback host (127.0.0.0/8, ::1,
//     "localhost": a local API, where it crosses no network; the transport
//     dials localhost names at the loopback addresses only,
//     outbound.Resolve, so a resolver cannot point one elsewhere); a binding
//     names hosts, not a scheme, so an ApiCall to http://<bound host>/…
//     is a PermissionError before anything is sent (the value would
//     travel in clear). Envelopes carry only the reference; values used
//     in an execution are redacted from responses, results, errors and
//     frames (an API echoing a header cannot leak it);
//     [Secret] prints as "[redacted]".
//   - Limits ([Limits]): maxOperations (20) and maxExecutionTime (30 s) per
//     workflow (overridable per principal), loop iterations, operations
//     run, nesting depth, the outputs' bytes of one execution together
//     (MaxDataBytes, 16 MiB), the values one operation references (its
//     url, headers, body, condition values and MergeData sources, a value
//     counted once per reference, also MaxDataBytes), ApiCall attempts per
//     principal ([CallLimiter]; the default [WindowLimiter] is per
//     process). FilterData, MergeData and TransformData's map, aggregate
//     and select stop at maxExecutionTime (a TimeoutError), not only between
//     operations; a map or an aggregate stops building once its output
//     passes the MaxDataBytes left. Validation checks an
//     operation listed again after itself in one list once, and stops with
//     a limit error past ten times MaxSteps operations visited (Conditionals
//     and Loops that list operations many times expand exponentially). A
//     workflow sure to pass MaxSteps (the operations an execution runs at
//     least: each listing in operationOrder, a Conditional's shorter branch
//     too, a Loop none) is refused by validation (CodeLimit on
//     operationOrder) before any operation acts, and so is one sure to
//     pass the [WindowLimiter]'s API calls (its ApiCalls counted the same
//     way: more than PerMinute when maxExecutionTime fits in a minute, or
//     than PerHour when it fits in an hour; not checked by a validate-only
//     executor, which does not know the caller's budget), or whose Waits fill maxExecutionTime (those it is sure
//     to run, counted the same way). [Executor.Capabilities] names the limits in
//     securityConstraints: the spec's maxExecutionTime and maxOperations,
//     and maxResponseBytes, maxLoopIterations, maxSteps, maxNesting,
//     maxStoreBytes, maxDataBytes, and apiCallsPerMinute and
//     apiCallsPerHour when the limiter is a [WindowLimiter], and
//     localStorageQuotaBytes and sessionStorageQuotaBytes when
//     Limits.LocalQuota and Limits.SessionQuota are set.
//
// # Retries and cache
//
// ApiCall retries connection errors, timeouts, 5xx, 408 and 429 at most 3
// times, waiting 1 s × 2^n (at most 60 s) with equal jitter, or the
// server's Retry-After when longer (a Retry-After beyond 60 s, or beyond
// the execution budget, ends the call instead). Other 4xx, validation,
// permission and size errors are not retried. A final error's retryable
// tells whether running the workflow again may succeed: a TimeoutError of
// maxExecutionTime is (spec §10: timeout errors are retryable), unless the
// workflow's own Waits fill the budget alone. An attempt's timeout bounds
// the read of its answer too, a 101 Switching Protocols' included (whose
// body net/http leaves unbounded).
//
// Results are cached per type (ApiCall GET 5 min, FilterData and
// TransformData 1 min, others never), keyed by the SHA-256 of the type and
// the resolved configuration (for ApiCall: principal, method, resolved url,
// literal headers, credential ids — never values — and body; for the data
// operations: principal, configuration and input, so no principal is
// served, or told of, what another ran). A non-GET ApiCall invalidates the
// principal's cached GETs of that host. The default [MemoryCache] is per
// process; [KVCache] on a JetStream KV bucket is shared by all workers.
//
// # Frames
//
// See [Executor.Serve]: first the plan (a custom chunk {kind: "status",
// data: {event: "a2e.execution", execution_id, workflow_execution_id,
// operations: operationOrder, each pending}}), a tool function_call chunk when each operation
// starts and a function_response chunk when it ends, a custom chunk per
// retry ({kind: "status", event: "a2e.retry", …}: A2E's invoke/event of
// kind status, as the plan's), then e2a.complete {result: {execution_id, workflow_execution_id,
// status, results, duration_ms}} or e2a.error {code, message, retryable,
// details: {error: {type, message, operationId, details, suggestions}, …}}.
// In the frames execution_id is the request id (unique) and
// workflow_execution_id the client's executionId (also the envelope's
// task_id). The execute answer follows the specification's example:
// execution_id is the executionId when it resolves to this execution for
// the caller (an executionId another principal used first stays theirs:
// then it is the request id), and request_id is always the request id.
// An executionId naming a task of the caller's that is not a workflow
// execution (an A2A task) is refused before the publish: 409,
// [ErrNotExecution].
// GET /api/v1/executions/{id} accepts either, of a workflow execution only
// (the frames' method; another request is not found) (an executionId reused by the
// same principal resolves to the newest; one sent over POST /a2e, type
// a2e.workflow.execute, is indexed before its publish: [ExecutionIndex]) and rebuilds the status from these
// frames ([StatusFromFrames]), execution_id echoing the id asked: while it
// runs, workflow_execution_id and every operation so far (pending,
// running, success, failed; an execution no worker has started lists its
// plan, read from its envelope); once ended, the runs that started, one
// the end cut (started, no result: a worker killed, a cancel) failed with
// an error saying so, and for an ApiCall or a StoreData that it may have
// acted (retryable false). A redelivered execution that already wrote frames
// is not resumed (its calls may have had effects): the agent runtime
// closes it with agent_interrupted, retryable; its status lists the call
// the dead worker had in flight. An ApiCall or StoreData
// acts only once its function_call frame is stored (agent.Writer.Sync), so a
// worker dying during the call cannot leave an execution without frames
// that the redelivery would run again.
//
// The KV buckets (local and session storage, cache) are provisioned by
// the caller (streams/); this package only uses the handles it is given.
package workflow

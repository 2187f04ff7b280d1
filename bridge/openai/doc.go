// Package openai is the bridge to an OpenAI-compatible chat completions
// endpoint (vLLM, Ollama, llama.cpp's server, OpenAI itself): the upstream
// of `e2a agent --pool P --openai URL --model NAME`. [New] returns a
// bridge.Upstream; bridge.New serves it as a pool.
//
// Each request is one POST {base}/chat/completions with stream: true and
// stream_options.include_usage: true (when the server refuses a call
// with a 400 or 422 naming it, the call is made again at once without it,
// and once that one is answered it is dropped for good; Mistral's API and
// Azure OpenAI's older versions refuse it),
// the bridge.Client's credentials
// (Authorization: Bearer <E2A_UPSTREAM_API_KEY>) and trace context, the
// request members of [WithParams] (the operator's: e.g. temperature,
// max_tokens, tools) and of the request's params (the allowlist:
// temperature, top_p, max_tokens, max_completion_tokens, stop, seed,
// presence_penalty, frequency_penalty, response_format, tools,
// tool_choice, parallel_tool_calls, reasoning_effort; a request's replaces
// the operator's, except that a request's max_tokens or
// max_completion_tokens above the operator's limit, the smaller of its
// two, is capped to it and sent in place of the operator's; one of the
// wrong JSON type ends the request invalid_request naming it, the model
// not called, and so does a tool that is not a function tool (custom
// tools' calls are not carried) or whose parameters are no object, or a
// tool_choice other than none, auto, required, a named function or
// allowed_tools; model, messages, stream, stream_options and n are the
// bridge's, never a request's), and the messages:
//
//   - the system prompt: [WithSystem], else the request's params.system
//     (an operator's prompt is never replaced by a client's);
//   - with [WithHistory], the earlier turns of the request's conversation
//     (A2A context, ACP session or E2A session_id, of the same owner
//     only, e2a.Envelope.Owner: bridge.Conversations) as the pipeline stored them: each turn's
//     user message (as below, images and audio included) and the content
//     of its final e2a.complete frame, with the tool calls it made
//     (assistant tool_calls, read from its stored function_call frames)
//     when the next turn answered them, then that turn's tool results as
//     tool messages; a turn without a text reply (failed, interrupted,
//     tool calls no turn answered, expired) is left out whole; past
//     [WithMaxHistoryTurns], a tool exchange is kept whole (cut before the
//     turn that made its first call). The turns are read newest first, and
//     only those whose stored bytes (each turn's envelope and final frame
//     as stored) fit in [WithMaxHistoryBytes] (default
//     bridge.DefaultMaxHistoryBytes, 4 MiB) are read and sent: the turn
//     that would pass it and every older one are left out, and so is the
//     rest of a tool exchange whose calling turn that cut leaves out (the
//     turns after it that carry tool results, each with its text and
//     reply), never sent without its calls. The bound keeps one request's
//     history to about that much memory, whatever the conversation holds
//     (bridge.MaxTurns turns of up to max_payload each); keep it above
//     twice the NATS server's max_payload, so that the last turn always
//     fits (a request answering the calls of a last turn past the bound
//     ends invalid_request);
//   - the request's tool results: its params.data_parts holding a
//     function_response (A2A DataParts of metadata type
//     function_response; an E2A client sends the same, {"data": {"id",
//     "name", "response"}, "metadata": {"type": "function_response"}}),
//     each a {"role":"tool","tool_call_id": id, "content": response (a
//     string as it is, else its JSON)}, after the last turn's assistant
//     message holding the calls. They must answer each call of the
//     conversation's last turn, and nothing else: otherwise (or without
//     [WithHistory]) the request ends invalid_request naming the call.
//     Tools are declared per request: send them again with the results,
//     or set them with [WithParams];
//   - the request's user message (none when it carries tool results
//     only): its text ([UserText]) as a plain string
//     (servers that take only strings keep working), or, when it carries
//     images or audio, an array of content parts: a text part, then each
//     ACP image block (of params.prompt, else of E2A's
//     params.content_blocks, spec §11.5) and A2A image file part
//     (params.files) as
//     {"type":"image_url","image_url":{"url"}} (a base64 data URL, or the
//     file's http(s) URL), each ACP audio block and A2A audio file part
//     (bytes) as {"type":"input_audio","input_audio":{"data","format"}}.
//     What a chat completion cannot carry (audio other than WAV or MP3,
//     audio by URL, a file neither image nor audio, or without a media
//     type, an image URL of another scheme) ends the request
//     invalid_request, naming it: the model is not called, rather than
//     answer about an attachment it never saw.
//
// The answer, a server-sent event stream read with a bounded line reader
// ([WithMaxEventBytes]; an event whose data is empty or blank, "data:"
// alone, is skipped, and so is an event named other than message or
// error, such as sse-starlette's "event: ping" before 1.4.0, unless it
// holds an error object), becomes the request's frames. The answer is
// complete at its finish reason: the usage chunk and [DONE] that may
// follow are waited for a grace of at most 2 s (half the client's idle
// timeout when that is shorter), which the server's comments (": ping")
// do not renew; a server that sends neither nor ends the stream then has
// its request completed with what came (the finish reason, the usage when
// it came). The answer is read as an event stream
// when typed text/event-stream or, typed otherwise or not at all
// (application/x-ndjson, text/plain), when it starts as one (a data,
// event, id or retry field, or a comment), as the official clients read
// any answer to a streamed call. A server that answers with one JSON
// object instead (it does not stream) is read as a client reads it, up to
// the event bound and, typed application/json, the client's body bound
// (bridge.WithMaxBodyBytes: upstream_protocol_error past it): a
// whole chat.completion as the one chunk that carries it (its message as
// the delta, its tool calls numbered in order), so it gives the same
// frames; an error object answered with 200 (or Google's array holding
// one) as the upstream's error; one that a body ended by the connection's
// close (no length, no chunks) stops mid-object as the connection cut
// (upstream_unavailable, retryable, as a stream that ends mid-line). An event whose choice holds a whole
// message instead of a delta (the completion sent as one event), before
// any delta, is read as that delta (after deltas it is not read again):
//
//   - choices[0].delta.content (and refusal) → e2a.chunk text deltas;
//   - delta.reasoning_content, or delta.reasoning → e2a.chunk reasoning;
//   - a content that is an array of parts (Mistral's reasoning models):
//     its thinking parts → reasoning, its text parts → text;
//   - a content that starts with a <think> block (a server without a
//     reasoning parser): the block → reasoning, the rest → text;
//   - in both, a character the server cut between two deltas (its UTF-8
//     bytes, or a JSON surrogate pair) is written whole, once, in the
//     delta that completes it; one never completed is U+FFFD at the end;
//   - streamed tool_calls (index, id, function.name, argument fragments)
//     → one e2a.chunk tool delta {type: function_call, id, name: its
//     fragments joined (as the official clients join them: a name split
//     over fragments is whole; one sent whole again with every fragment is
//     kept once, where the official clients repeat it), args: the assembled arguments, a JSON string ("{}" when
//     the server sent none or only white space)} per call, written when the call
//     is whole: at the finish reason, or as soon as a later call starts
//     when its arguments already form a whole JSON value (fragments of
//     several calls may interleave). Calls are never merged: a fragment
//     with another id than its index's call (a server that numbers every
//     call 0), or naming a function with arguments that start a second
//     JSON value, starts a new call; fragments without an index (Gemini's
//     OpenAI-compatible endpoint) continue the last such call unless they
//     carry a new id (or are a second fragment of one chunk); a second
//     JSON value nothing tells apart, or a call no fragment gives a
//     function name, is upstream_protocol_error, as are calls held (not
//     yet whole, or after one that is not) of more bytes than are left
//     of the answer bound (bridge.AnswerBytesLeft: they could never all
//     be written, and the bound counts only what is);
//   - the final frame: e2a.complete {"content": the full text,
//     "finish_reason", "usage" (when the server sent it), "model" (the
//     server's, else the one asked for),
//     "refusal" (the model's refusal, delta.refusal, also written as the
//     answer's text, when it refused)}; a text larger than a frame can
//     be (the server's max_payload, agent.MaxFrameBytes), or than what
//     its deltas left of the answer bound (bridge.WithMaxAnswerBytes), is
//     left out, "content_omitted" saying so (the text deltas hold it), and
//     is not kept by the bridge past a frame's size while it streams; a
//     refusal is then cut to its first 1,000 characters (it is part of
//     that text).
//
// Every frame of the call carries the completion's id as metadata
// llm_response_id ([MetadataResponseID]), with which the A2A renderers put
// the events of one model response in one artifact.
//
// Failures end the request with the bridge's error codes: a non-2xx answer
// by its status (bridge.FromResponse: 429 and 5xx are retried before any
// frame by bridge.Handler, never after); an error object in the stream by
// its type or code (rate limit and server errors retryable, a refused
// request or credentials not, anything else upstream_failed; an error
// given as text only, an error event's data or a 200 text/plain answer,
// that says "rate limit", "too many requests" or 429 is
// upstream_rate_limited, retried before any frame as a 429 is); a line that
// is not SSE, an event that is not a chunk, or an answer that is neither
// an event stream nor a completion or error object (an HTML page) →
// upstream_protocol_error; a stream that ends with neither
// a finish_reason nor [DONE], or is cut (the connection closed or reset,
// an HTTP/2 stream reset, or a clean end in the middle of a line whose
// event does not decode) → upstream_unavailable; silence past the client's
// idle timeout → upstream_timeout. A request with no
// text, image, audio or tool result gets invalid_request; a history the pipeline cannot read,
// history_unavailable (retryable).
//
// Not sent: other request members (a request's are ignored, an
// operator's refused); the model's tool calls are passed through, never
// executed (the client runs them and sends their results); an ACP
// embedded resource that is binary is named in the text, not sent
// ([UserText]). Sampling parameters and tools come only from the
// envelope's params: an E2A request's, or an ACP prompt's
// _meta.e2a_params (which the ACP door lifts into params); A2A message
// metadata is not read.
package openai

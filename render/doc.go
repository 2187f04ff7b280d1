// Package render is the renderer toolkit: what every output format of the
// pipeline (E2A's own, served by package egress, and each protocol
// package's) is written with. It reads no stream and knows no protocol:
// package egress's reader delivers the frames, and its Service drives a
// renderer with them.
//
//   - [Frame]: one response frame as a reader delivers it: decoded
//     (Response) or, for a [PassThrough] renderer, only its head read
//     ([Head], [HeadFrame]) with the bytes as stored (Raw);
//     [Frame.Decoded] decodes it on demand.
//   - [Renderer] (Start, Frame, Heartbeat, End) and [NewRenderer]: one
//     output format on one response.
//   - [Output]: the response a renderer writes to, with a write deadline
//     (a client that stops reading is cut off), a scratch buffer reused
//     from one event to the next, and the hooks the driver uses to hold the
//     head until the first frame and to flush when no frame is waiting.
//   - Server-Sent Events ([SSEHead], [SSEComment], [SSEEvent],
//     [SSEEventJSON], [SSEEndEvent]) and NDJSON ([NDJSONHead], [WriteLine],
//     [WriteLineJSON]); [SeqID] and [FrameEvents] give the last event of a
//     frame its sequence as SSE id (what Last-Event-ID resumes from).
//   - The text fast path: [ReadTextChunk] and [ReadPlainText] read a plain
//     text chunk from a frame's bytes without decoding it (the strings are
//     views of Raw), for A2A's and ACP's streams.
//
// Errors: [ErrInvalidFrame] for a frame that does not decode.
package render

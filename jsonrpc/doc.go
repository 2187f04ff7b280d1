// Package jsonrpc is the one JSON-RPC 2.0 implementation of the pipeline:
// the wire types (Request, Response, Notification, Error), the exact
// decoding of request bodies with batches and bounds ([Decode]), the
// answering of batches ([Batch]), the HTTP writers, and the one table of
// error codes every protocol served over JSON-RPC uses (A2A v0.3, the
// AgentVault profile, ACP, and the pipeline's own).
//
// It knows nothing of the protocols' methods: the ingress front doors
// (HTTP and stdio) decode with it, dispatch the method to the protocol, and
// write the answer with it; egress renders streamed JSON-RPC answers with
// its types.
//
// # Conformance
//
// JSON-RPC 2.0 (https://www.jsonrpc.org/specification), exactly:
//
//   - A body that is not valid JSON, or not valid UTF-8, is answered with
//     -32700 and id null.
//   - An element that is not a valid Request object (not an object, jsonrpc
//     not exactly the string "2.0", method missing, empty or not a string, id
//     not a string, number or null, params not an object or array) is
//     answered with -32600, with its id when that id was valid, else null.
//     Member names are matched exactly (case-sensitively); unknown members
//     are ignored. One leniency: "params": null is read as absent, because
//     several real clients send it.
//   - -32601 (method not found) and -32602 (invalid params) are the
//     dispatcher's to answer: see [MethodNotFound] and [InvalidParams].
//   - A Request without an "id" member is a notification and gets no reply,
//     not even an error from its handler. An invalid element always gets a
//     reply (the specification cannot know it was meant as a notification).
//
// Batches are answered per the specification by [Batch]: an array of the
// responses of the non-notification elements (in element order), nothing
// at all (HTTP 204) when every element was a notification, and one -32600
// response (not an array) for an empty array. Streaming methods cannot be
// answered inside an array of responses, so a batch element naming one is
// answered with -32600 and a message saying so; the other elements are
// answered normally. Batches larger than DecodeOptions.MaxBatch are refused
// whole with one -32600 response.
//
// Bodies nested deeper than DecodeOptions.MaxDepth (arrays and objects,
// counted over the whole body, params included) are refused with -32600
// before anything is decoded, however deep (past encoding/json's 10,000
// levels too: valid JSON, not a -32700).
package jsonrpc

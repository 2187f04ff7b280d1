// Package echo is a protocol added beside the pipeline's, for the test
// that adding a protocol is its package, one registry line and its golden
// files (protocols' TestAddedProtocol): POST /echo with {"text":"…"} is
// normalized into an E2A envelope (its service's own adapter, Normalize),
// published to the routing rule's pool, and answered from the request's
// frames as NDJSON lines ({"text":"…"} per text chunk, {"done":true,…} at
// the end) by its renderer. It lives under testdata: the go tool builds it
// only for the tests that import it.
package echo

package tck

import "github.com/e2a-pipeline/pipeline/bridge"

// The TCK's second profile: the suite's tests of what an agent does not
// offer (CORE-CAP-002, CORE-CAP-004, GRPC-ERR-002, HTTP_JSON-STATUS-001,
// JSONRPC-SSE-002) need a card without streaming and requiring its own
// extension. `e2a dev` serves the pool BasicPool with the same scenario
// agent and publishes BasicPoolInfo as the pool's info, which ingress
// enforces before anything is published and writes into the pool's card
// (and the root card, when BasicPool is E2A_DEFAULT_POOL).
const (
	// BasicPool is the pool name of the second profile.
	BasicPool = "tck-basic"
	// RequiredExtension is the extension the suite declares required
	// (tests/compatibility/core_operations/test_error_handling.py).
	RequiredExtension = "urn:a2a:tck:required-extension"
)

// BasicPoolInfo is BasicPool's info: no streaming, RequiredExtension
// required.
func BasicPoolInfo() bridge.PoolInfo {
	return bridge.PoolInfo{Pool: BasicPool, Kind: "builtin", Name: "A2A TCK scenarios (basic profile)",
		Description:        "The A2A TCK scenario agent without streaming, requiring " + RequiredExtension,
		Streaming:          false,
		RequiredExtensions: []string{RequiredExtension}}
}

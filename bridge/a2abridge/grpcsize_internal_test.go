package a2abridge

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// TestGRPCSizeRefusalNotRateLimit: grpc-go's RESOURCE_EXHAUSTED for a
// message over a size bound (an agent's answer over the bridge's, the
// bridge's message over the agent's) is upstream_protocol_error, not
// retryable: the same call fails the same way again. It was
// upstream_rate_limited, retryable, as an agent's own RESOURCE_EXHAUSTED
// (its rate limit), which still is.
func TestGRPCSizeRefusalNotRateLimit(t *testing.T) {
	for _, c := range []struct {
		msg       string
		code      string
		retryable bool
	}{
		{"grpc: received message larger than max (5243053 vs. 4194304)", bridge.CodeProtocol, false},
		{"grpc: received message after decompression larger than max (5243053 vs. 4194304)", bridge.CodeProtocol, false},
		{"grpc: trying to send message larger than max (5243053 vs. 4194304)", bridge.CodeProtocol, false},
		{"quota exceeded: 10 calls a minute", bridge.CodeRateLimited, true},
	} {
		var be *bridge.Error
		if err := rateLimited(status.Error(codes.ResourceExhausted, c.msg)); !errors.As(err, &be) || be.Code != c.code || be.Retryable != c.retryable {
			t.Errorf("RESOURCE_EXHAUSTED %q: %v, want %s retryable %v", c.msg, err, c.code, c.retryable)
		}
	}
}

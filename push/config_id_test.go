package push_test

import (
	"errors"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestConfigIDDotSegmentRefused: a config id "." or ".." is refused
// (ErrInvalidConfig: InvalidParams in A2A). The HTTP+JSON binding names a
// config in its path (/tasks/{id}/pushNotificationConfigs/{configId}),
// where "." and ".." are dot segments that clients and servers remove
// (RFC 3986 §5.2.4; gRPC transcoding does not escape '.'): such a config,
// accepted over JSON-RPC and gRPC, could not be read or deleted over
// HTTP+JSON. Any other id is addressable, escaped ("a/b" as a%2Fb).
func TestConfigIDDotSegmentRefused(t *testing.T) {
	_, nc := natstest.RunServer(t)
	s, err := push.NewStore(tctx(t), nc, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{".", ".."} {
		if _, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", ID: id, URL: "http://127.0.0.1:1/"}); !errors.Is(err, push.ErrInvalidConfig) {
			t.Errorf("config id %q: %v, want ErrInvalidConfig", id, err)
		}
	}
	for _, id := range []string{"...", ".x", "a/b", "a%b", "a?b"} {
		if _, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", ID: id, URL: "http://127.0.0.1:1/"}); err != nil {
			t.Errorf("config id %q: %v", id, err)
		}
	}
}

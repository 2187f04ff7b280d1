package push_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestAllowHostsRefusesBadPort: WithAllowHosts checks the host of each
// pattern but not its port: "localhost:abc" or "localhost:99999" is
// accepted and silently never matches a webhook URL, instead of being
// refused with ErrInvalidOption as a bad host is.
func TestAllowHostsRefusesBadPort(t *testing.T) {
	_, nc := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"localhost:abc", "localhost:99999", "localhost:-1"} {
		t.Run(p, func(t *testing.T) {
			_, err := push.NewStore(ctx, nc, push.WithAllowHosts(p))
			if !errors.Is(err, push.ErrInvalidOption) {
				t.Errorf("NewStore(WithAllowHosts(%q)) = %v, want an error wrapping ErrInvalidOption", p, err)
			}
		})
	}
}

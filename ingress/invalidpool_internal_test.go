package ingress

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestInvalidPoolSaidOnce: an agent pool name that is no valid token is
// refused by the pool check and the publish saying so once, naming the
// name ("invalid agent pool: \"a.b\"", not "invalid agent pool: invalid
// agent pool name: \"a.b\""), the error matching both packages' sentinels.
// Neither reaches NATS.
func TestInvalidPoolSaidOnce(t *testing.T) {
	ctx := context.Background()
	_, checked := newPools(nil, time.Second, time.Now, nil).state(ctx, "a.b")
	_, published := NewPublisher(nil, time.Second).Publish(ctx, "a.b", &e2a.Envelope{RequestID: "r-pool"})
	for name, err := range map[string]error{"pool check": checked, "publish": published} {
		if want := `ingress: invalid agent pool: "a.b"`; err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %s", name, err, want)
		}
		if !errors.Is(err, ErrInvalidPool) || !errors.Is(err, subjects.ErrInvalidPool) {
			t.Errorf("%s: %v matches not both ErrInvalidPool and subjects.ErrInvalidPool", name, err)
		}
	}
}

package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// PoolInfo is what a bridge pool tells clients about itself: ingress
// serves it as the pool's A2A agent card (/pools/<pool>/.well-known/
// agent-card.json) and lists the pool in the pipeline's own card. It holds
// nothing secret: the upstream's address only as Upstream (scheme and
// host), never a credential.
type PoolInfo struct {
	Pool        string `json:"pool"`
	Kind        string `json:"kind"`     // a2a, openai, http
	Upstream    string `json:"upstream"` // scheme://host (Client.Name)
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version,omitempty"`
	// Skills are A2A AgentSkill objects (id, name, description, tags,
	// examples, inputModes, outputModes).
	Skills      []map[string]any `json:"skills,omitempty"`
	Streaming   bool             `json:"streaming"`
	InputModes  []string         `json:"input_modes,omitempty"`
	OutputModes []string         `json:"output_modes,omitempty"`
	Updated     string           `json:"updated,omitempty"`
	// RequiredExtensions are the URIs of the A2A extensions a request to
	// the pool must activate (A2A-Extensions): ingress refuses one that
	// does not with ExtensionSupportRequiredError, and the pool's card
	// lists them as required. With Streaming false, SendStreamingMessage
	// and SubscribeToTask are refused (UnsupportedOperationError) and the
	// card says streaming false; a pool without info streams.
	RequiredExtensions []string `json:"required_extensions,omitempty"`
}

// poolKey is the E2A_BRIDGE key of pool's PoolInfo.
func poolKey(pool string) (string, error) {
	if err := subjects.ValidatePool(pool); err != nil {
		return "", err
	}
	return "pool." + pool, nil
}

// PublishPool stores info (a bridge pool does it at start-up, so that
// every ingress replica serves its card).
func (c *Conversations) PublishPool(ctx context.Context, info PoolInfo) error {
	key, err := poolKey(info.Pool)
	if err != nil {
		return err
	}
	info.Updated = time.Now().UTC().Format(time.RFC3339)
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := c.kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("bridge: publish pool info: %w", err)
	}
	return nil
}

// LookupPool returns the PoolInfo a bridge pool published (found false when
// none did, or no bridge ever ran: the bucket does not exist).
func LookupPool(ctx context.Context, js jetstream.JetStream, pool string) (info PoolInfo, found bool, err error) {
	key, err := poolKey(pool)
	if err != nil {
		return PoolInfo{}, false, nil
	}
	kv, err := js.KeyValue(ctx, streams.BridgeBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return PoolInfo{}, false, nil
	}
	if err != nil {
		return PoolInfo{}, false, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return PoolInfo{}, false, nil
	}
	if err != nil {
		return PoolInfo{}, false, err
	}
	if err := json.Unmarshal(e.Value(), &info); err != nil {
		return PoolInfo{}, false, fmt.Errorf("bridge: pool info of %s: %w", pool, err)
	}
	return info, true, nil
}

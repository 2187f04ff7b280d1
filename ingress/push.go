package ingress

import (
	"fmt"

	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/push"
)

// WithPushStore serves A2A's push notification config methods (v1.0's
// four on every binding, SendMessage's inline config) from store, and
// the cards declare pushNotifications. Without it they answer
// PushNotificationNotSupported.
func WithPushStore(store *push.Store) Option {
	return func(o *options) error {
		if store == nil {
			return fmt.Errorf("ingress: nil push store")
		}
		o.push = store
		return nil
	}
}

var _ a2av1.PushHost = protocolHost{}

// PushStore is the push config store (nil without WithPushStore).
func (h protocolHost) PushStore() *push.Store { return h.s.opts.push }

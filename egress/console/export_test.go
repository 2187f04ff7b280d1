package console

import "time"

// WithIndexPublishTimeout sets how long the indexer waits for the index
// stream's acknowledgement of a publish (a test's lost ack ends in
// milliseconds instead of indexPublishTimeout).
func WithIndexPublishTimeout(d time.Duration) Option {
	return func(o *options) error { o.publishTimeout = d; return nil }
}

package streams

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Push notifications (package push).
const (
	// PushBucket holds the push notification configs of tasks (one key per
	// principal and task) and each config's delivery cursor; keys expire
	// after Config.TasksTTL without an update, with their tasks.
	PushBucket = "E2A_PUSH"
	// PushDeadStream holds the task updates the push stage gave up on,
	// under e2a.push.dead.<principal>.<task>.<config> (encoded tokens),
	// until they are redelivered or PushDeadMaxAge passes.
	PushDeadStream = "E2A_PUSH_DEAD"
	// PushDeadSubjects matches every dead-lettered update.
	PushDeadSubjects = "e2a.push.dead.>"
	// PushDeadMaxAge is how long a dead-lettered update is kept.
	PushDeadMaxAge = 7 * 24 * time.Hour
	// PushDeadMaxBytes bounds E2A_PUSH_DEAD (oldest dropped first). The
	// push stage keeps each principal within a share of it once it is
	// half full (push.WithDeadShare, E2A_PUSH_DEAD_SHARE), so that one
	// principal's dead letters do not make the stream drop another's.
	PushDeadMaxBytes = 1 * GiB
)

// PushBucketConfig returns the definition of E2A_PUSH: one revision per
// key, TasksTTL (0: no expiry), KeyValueMaxBytes, direct gets allowed
// (every frame of a task reads its configs and every delivery its cursor).
func (c Config) PushBucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      PushBucket,
		Description: "E2A push notification configs per principal and task, and their delivery cursors",
		History:     1,
		TTL:         c.TasksTTL,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
		MaxBytes:    c.KeyValueMaxBytes,
	}
}

// PushDeadStreamConfig returns the definition of E2A_PUSH_DEAD: subjects
// e2a.push.dead.>, limits retention, PushDeadMaxAge, PushDeadMaxBytes
// (DiscardOld), the Duplicates window (a dead-lettering retried after a
// crash is stored once), direct gets allowed; messages are deleted once
// redelivered.
func (c Config) PushDeadStreamConfig() jetstream.StreamConfig {
	s := c.base(PushDeadStream, "E2A push notifications given up on, e2a.push.dead.<principal>.<task>.<config>")
	s.Subjects = []string{PushDeadSubjects}
	s.MaxAge = PushDeadMaxAge
	s.MaxBytes = PushDeadMaxBytes
	s.Duplicates = c.Duplicates
	s.AllowDirect = true
	return s
}

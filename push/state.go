package push

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/push/pushstate"
	"github.com/e2a-pipeline/pipeline/streams"
)

// DeliveryState is one config's delivery state as the console shows it
// to the task's owner (the console's PushDelivery is the same type).
type DeliveryState = pushstate.Delivery

// Deliveries returns the delivery state of each of principal's configs
// of task taskID, ordered by config id (none for another principal's
// task: the same answer as a task without configs). It costs one read of
// the task's configs, one of each config's cursor and one stream info of
// E2A_PUSH_DEAD filtered by the task's subjects: the stage keeps one
// cursor per config, not a record per update. The cursors are read
// before the counts: the stage stores a dead letter before it moves the
// cursor past it, so DeadLetters counts at least every dead-lettered
// update up to LastEvent (counts read first could miss the ones stored
// between the two reads, a cursor on the last update with none counted).
func (s *Store) Deliveries(ctx context.Context, principal, taskID string) ([]DeliveryState, error) {
	tc, _, err := readConfigs(ctx, s.kv, taskKey(principal, taskID), s.o.sealer)
	if err != nil {
		return nil, err
	}
	out := make([]DeliveryState, 0, len(tc.Configs))
	if len(tc.Configs) == 0 {
		return out, nil
	}
	for _, c := range tc.Configs {
		cur, _, err := readCursor(ctx, s.kv, configRef{principal, taskID, c.ID}.cursorKey())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		cur = cur.forConfig(c)
		d := DeliveryState{ConfigID: c.ID, Version: c.Version, Created: c.Created, LastEvent: cur.EventID,
			FailingSince: cur.FailingSince, Attempts: cur.Attempts, NextAttempt: cur.NextAttempt,
			DeadLetterMode: cur.Dead}
		if u, err := url.Parse(c.URL); err == nil {
			d.Host = u.Host
		}
		out = append(out, d)
	}
	dead, err := s.deadCounts(ctx, principal, taskID)
	if err != nil {
		return nil, err
	}
	for i, c := range tc.Configs {
		out[i].DeadLetters = dead[configRef{principal, taskID, c.ID}.deadSubject()]
	}
	return out, nil
}

// deadCounts counts the dead-lettered updates of each config of
// principal's task (by subject); none when the stage never made
// E2A_PUSH_DEAD.
func (s *Store) deadCounts(ctx context.Context, principal, taskID string) (map[string]uint64, error) {
	st, err := s.js.Stream(ctx, streams.PushDeadStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return map[string]uint64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %v", ErrUnavailable, streams.PushDeadStream, err)
	}
	subj := "e2a.push.dead." + tok(principal) + "." + tok(taskID) + ".*"
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %v", ErrUnavailable, streams.PushDeadStream, err)
	}
	if info.State.Subjects == nil {
		return map[string]uint64{}, nil
	}
	return info.State.Subjects, nil
}

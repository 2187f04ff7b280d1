package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Keep writes principal's configs of task taskID again, as they are, and
// the delivery cursors of those configs, each key that was last written
// after ago or longer (the others are left): the keys of E2A_PUSH expire
// with the bucket's TTL (E2A_TASKS_TTL) after their last write, and the
// stage writes a task's key at the first message of each turn only
// (keepConfigs), so a turn running longer than the TTL lost its task's
// configs, and their positions, before its final update was delivered.
// The replica that publishes a turn (or takes it over once that one
// stops) calls Keep while the turn runs, as it writes the task's record
// again (ingress's keeper). Each write is a
// compare-and-set on the revision read, of the bytes read: nothing is
// created, a key deleted or changed meanwhile (a config deleted, a
// delivery's cursor) is left as that writer left it, and a key absent
// (never made, deleted, expired) stays absent. A cursor is written again
// only when no delivery wrote it for that long; a lane that delivers to
// its config in the moment between this read and write finds its own
// write refused (errMoved), reads the cursor again and goes on from
// there: at worst it posts that update once more, which at-least-once
// delivery allows (the receiver has its event id). Costs a read of the task's
// key (none more when it has no configs), a read per config, and a
// write per key that old.
func (s *Store) Keep(ctx context.Context, principal, taskID string, after time.Duration) error {
	key := taskKey(principal, taskID)
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// The ids only: the sealed fields stay as stored.
	var tc struct {
		Configs []struct {
			ID string `json:"id"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(e.Value(), &tc); err != nil {
		return fmt.Errorf("%w: key %s: %v", ErrUnavailable, key, err)
	}
	errs := []error{s.keepEntry(ctx, e, after)}
	for _, c := range tc.Configs {
		ce, err := s.kv.Get(ctx, configRef{principal, taskID, c.ID}.cursorKey())
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			errs = append(errs, fmt.Errorf("%w: %v", ErrUnavailable, err))
		default:
			errs = append(errs, s.keepEntry(ctx, ce, after))
		}
	}
	return errors.Join(errs...)
}

// keepEntry writes e again as it is (a compare-and-set on its revision)
// when it was written after ago or longer.
func (s *Store) keepEntry(ctx context.Context, e jetstream.KeyValueEntry, after time.Duration) error {
	if s.now().Sub(e.Created()) < after {
		return nil
	}
	_, err := s.put(ctx, e.Key(), e.Value(), e.Revision())
	return err
}

package push

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// A principal's task slots: WithMaxTasksPerPrincipal across replicas.
//
// The tasks with configs of a principal are counted in one key of
// E2A_PUSH, "slots.<principal>", holding a slot per task (by a hash of
// the task id): a create of a task's first config (a new task key) takes
// the task's slot with a compare-and-set of that key (Update at its
// revision; on a conflict it reads again and retries) before it writes
// the task key, and is refused (ErrLimit) when the principal holds
// WithMaxTasksPerPrincipal slots: creates running together on any number
// of replicas cannot all pass, exactly the limit do. A task that has its
// slot takes more configs without touching the key.
//
// A slot is given back when its task key is deleted (the task's last
// config deleted, or a create taken back). Each slot carries a random
// reservation, also stored in the task key (taskConfigs.Slot); the delete
// removes the slot when it is its key's reservation, one the recount
// adopted, or one older than slotGrace. It keeps a fresh slot of another
// reservation: a create of the same task, under way since the delete,
// whose key is about to be written.
//
// Nothing leaks for good. A create that dies between its slot and its
// key, a give-back that fails, a task key that expires (the bucket's
// TTL) all leave a slot without its key. When a principal is full, the
// slots are recounted against the task keys that exist (a listing of
// "cfg.<principal>.*"), at most once per slotGrace per principal: a slot
// whose key is missing and that is older than slotGrace is removed, a key
// without a slot (one written before the slots were kept, or while the
// slots key had expired) is adopted. A missing slots key (first use,
// expired with the bucket's TTL) is rebuilt by the same recount. The
// recount takes a stalled create (more than slotGrace between its slot
// and its key, clocks of the replicas apart by less than that) for a dead
// one; its key, once written, is adopted by the next recount: the
// principal is then over the limit by that task, and refused until it
// deletes.
//
// The key's value is about 55 bytes a slot: WithMaxTasksPerPrincipal is
// at most 10,000 (about 550 KB, under the deployment's max_payload).

// slotGrace is how long a slot's reservation is taken for a create under
// way, and the least time between two recounts of a principal's slots.
const slotGrace = time.Minute

// casAttempts bounds the compare-and-sets of one change of a key that
// concurrent writers share: a principal's slots (a reservation, a
// give-back) and a task's configs (a create, its start moved, its undo, a
// delete). Each refused one is followed by casBackoff.
const casAttempts = 32

// taskSlots is the value of a principal's slots key.
type taskSlots struct {
	// Tasks are the slots by slotOf the task.
	Tasks map[string]taskSlot `json:"tasks"`
	// Checked is when the slots were last recounted (Unix milliseconds).
	Checked int64 `json:"checked,omitempty"`
}

// taskSlot is one task's slot.
type taskSlot struct {
	// Res is the reservation that took it, also in the task key; "": one
	// a recount adopted.
	Res string `json:"r,omitempty"`
	// At is when it was taken (Unix milliseconds); 0: adopted.
	At int64 `json:"at,omitempty"`
}

// slotsKey is the key of principal's slots.
func slotsKey(principal string) string { return "slots." + tok(principal) }

// slotOf is the slot name of the task whose key token (tok of its id) is
// taskTok: a hash, so that a slot's size does not grow with the id.
func slotOf(taskTok string) string {
	h := sha256.Sum256([]byte(taskTok))
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

func newReservation() string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Store) grace() time.Duration {
	if s.slotGrace > 0 {
		return s.slotGrace
	}
	return slotGrace
}

func (s *Store) readSlots(ctx context.Context, key string) (taskSlots, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return taskSlots{Tasks: map[string]taskSlot{}}, 0, nil
	}
	if err != nil {
		return taskSlots{}, 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var sl taskSlots
	if err := json.Unmarshal(e.Value(), &sl); err != nil {
		return taskSlots{}, 0, fmt.Errorf("%w: key %s: %v", ErrUnavailable, key, err)
	}
	if sl.Tasks == nil {
		sl.Tasks = map[string]taskSlot{}
	}
	return sl, e.Revision(), nil
}

// writeSlots stores sl under key at revision rev (0: a new key); false
// when another writer changed the key first.
func (s *Store) writeSlots(ctx context.Context, key string, sl taskSlots, rev uint64) (bool, error) {
	b, err := json.Marshal(sl)
	if err != nil {
		return false, err
	}
	return s.put(ctx, key, b, rev)
}

// casBackoff waits before the attempt-th compare-and-set: nothing before
// the first (attempt 0), then a random time below 0.5 ms, then below 1, 2,
// 4 … 16 ms, so that replicas racing for the key do not retry in step
// (sleepctx.Backoff).
func casBackoff(ctx context.Context, attempt int) error {
	if err := sleepctx.Backoff(ctx, attempt, 500*time.Microsecond, 16*time.Millisecond); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// reserve takes principal's slot for task taskID, returning its
// reservation (to store in the task key), or ErrLimit when the principal
// holds its WithMaxTasksPerPrincipal slots.
func (s *Store) reserve(ctx context.Context, principal, taskID string) (string, error) {
	key, h, res := slotsKey(principal), slotOf(tok(taskID)), newReservation()
	for attempt := range casAttempts {
		if attempt > 0 {
			if err := casBackoff(ctx, attempt); err != nil {
				return "", err
			}
		}
		sl, rev, err := s.readSlots(ctx, key)
		if err != nil {
			return "", err
		}
		now := s.now()
		_, held := sl.Tasks[h]
		full := !held && len(sl.Tasks) >= s.o.maxTasksPerPrincipal
		recounted := false
		if rev == 0 || (full && now.Sub(time.UnixMilli(sl.Checked)) >= s.grace()) {
			if err := s.recount(ctx, principal, &sl, now); err != nil {
				return "", err
			}
			_, held = sl.Tasks[h]
			full, recounted = !held && len(sl.Tasks) >= s.o.maxTasksPerPrincipal, true
		}
		if full {
			if recounted {
				// Kept, so that the other creates refused do not recount.
				_, _ = s.writeSlots(ctx, key, sl, rev)
			}
			return "", fmt.Errorf("%w: %d tasks with push notification configs", ErrLimit, len(sl.Tasks))
		}
		sl.Tasks[h] = taskSlot{Res: res, At: now.UnixMilli()}
		ok, err := s.writeSlots(ctx, key, sl, rev)
		if err != nil {
			return "", err
		}
		if ok {
			return res, nil
		}
	}
	return "", fmt.Errorf("%w: too many concurrent changes to the principal's task slots", ErrUnavailable)
}

// recount sets sl (principal's slots, read at now) to the task keys that
// exist: a slot whose key is missing is kept only while it is younger
// than slotGrace (a create under way), a key without a slot is adopted.
func (s *Store) recount(ctx context.Context, principal string, sl *taskSlots, now time.Time) error {
	l, err := s.kv.ListKeysFiltered(ctx, principalKeys(principal))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer func() { _ = l.Stop() }()
	out := map[string]taskSlot{}
	for k := range l.Keys() {
		h := slotOf(k[strings.LastIndexByte(k, '.')+1:])
		out[h] = sl.Tasks[h] // the zero slot when adopted
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	for h, e := range sl.Tasks {
		if _, ok := out[h]; !ok && now.Sub(time.UnixMilli(e.At)) < s.grace() {
			out[h] = e
		}
	}
	sl.Tasks, sl.Checked = out, now.UnixMilli()
	return nil
}

// release gives back principal's slot of task taskID, whose key, of
// reservation res, was just deleted. It keeps a fresh slot of another
// reservation (a create of the task under way); a failure leaves the slot
// to the next recount.
func (s *Store) release(ctx context.Context, principal, taskID, res string) {
	s.editSlot(ctx, principal, taskID, func(sl *taskSlots, h string, e taskSlot) bool {
		if e.Res != res && e.Res != "" && s.now().Sub(time.UnixMilli(e.At)) < s.grace() {
			return false
		}
		delete(sl.Tasks, h)
		return true
	})
}

// handOver gives principal's slot of task taskID, taken by reservation
// res for a key that another create wrote first (its reservation
// theirs), to that key: a delete of the key then gives it back at once.
// It leaves a slot another reservation took since; a failure leaves the
// slot to the delete's grace or the next recount.
func (s *Store) handOver(ctx context.Context, principal, taskID, res, theirs string) {
	s.editSlot(ctx, principal, taskID, func(sl *taskSlots, h string, e taskSlot) bool {
		if e.Res != res {
			return false
		}
		e.Res = theirs
		sl.Tasks[h] = e
		return true
	})
}

// editSlot changes principal's slot of task taskID with edit (false: no
// change to write) and writes the slots back by compare-and-set, read
// again on a conflict; it gives up on a failure, without the slot, or
// after casAttempts.
func (s *Store) editSlot(ctx context.Context, principal, taskID string, edit func(sl *taskSlots, h string, e taskSlot) bool) {
	key, h := slotsKey(principal), slotOf(tok(taskID))
	for attempt := range casAttempts {
		if casBackoff(ctx, attempt) != nil {
			return
		}
		sl, rev, err := s.readSlots(ctx, key)
		if err != nil || rev == 0 {
			return
		}
		e, ok := sl.Tasks[h]
		if !ok || !edit(&sl, h, e) {
			return
		}
		if ok, err := s.writeSlots(ctx, key, sl, rev); ok || err != nil {
			return
		}
	}
}

package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Store defaults.
const (
	DefaultMaxPerTask           = 10
	DefaultMaxTasksPerPrincipal = 1000
	DefaultPageSize             = 50
	MaxPageSize                 = 100
)

// taskConfigs is the value of a task's key: its configs, ordered by id.
type taskConfigs struct {
	Configs []Config `json:"configs"`
	// Slot is the reservation of the task's slot among its principal's
	// (slots.go); "" in a key written before the slots were kept.
	Slot string `json:"slot,omitempty"`
}

// Store keeps the push notification configs of tasks in the E2A_PUSH
// bucket. Every call takes the caller's principal (the envelope's user_id
// of the task's requests): a config is stored under its principal's key,
// so another principal's config is not found, cannot be listed, replaced
// or deleted, and a caller cannot tell it from one that does not exist.
// Checking that the task exists and is the caller's is the A2A layer's
// (its task store); the Store keeps only configs. It is safe for
// concurrent use.
type Store struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	o   options
	now func() time.Time
	// gap, when set (tests), runs between the two reads of the stream's
	// last sequence a create makes: before the config is written.
	gap func()
	// reserved, when set (tests), runs after a create took its task's
	// slot, before it writes the task key; an error ends the create there.
	reserved func() error
	// slotGrace, when set (tests), replaces slotGrace.
	slotGrace time.Duration
	// hooks guards onCreate, the functions OnCreate registered.
	hooks    sync.Mutex
	onCreate []func(principal, taskID string)
}

// NewStore binds the E2A_PUSH bucket on nc, creating it with the options'
// streams.Config when it does not exist.
func NewStore(ctx context.Context, nc *nats.Conn, opts ...Option) (*Store, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrInvalidOption)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	js, kv, err := openBucket(ctx, nc, o.streams)
	if err != nil {
		return nil, err
	}
	return storeOver(js, kv, o), nil
}

// storeOver is a Store of the E2A_PUSH bucket kv, bound on js, with the
// options o: NewStore's, and the one the stage and a redelivery use to
// read and delete configs as the A2A methods do.
func storeOver(js jetstream.JetStream, kv jetstream.KeyValue, o options) *Store {
	return &Store{js: js, kv: kv, o: o, now: time.Now}
}

// openBucket connects to JetStream on nc and binds the E2A_PUSH bucket,
// creating it with cfg when it does not exist.
func openBucket(ctx context.Context, nc *nats.Conn, cfg streams.Config) (jetstream.JetStream, jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	kv, err := bindBucket(ctx, js, cfg)
	if err != nil {
		return nil, nil, err
	}
	return js, kv, nil
}

func bindBucket(ctx context.Context, js jetstream.JetStream, cfg streams.Config) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, streams.PushBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg.PushBucketConfig())
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, streams.PushBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrUnavailable, streams.PushBucket, err)
	}
	return kv, nil
}

// lastResponse is c's start: the last sequence of E2A_RESPONSES, the
// time its message was stored and the stream's creation time (Unix
// nanoseconds: Config.From, FromAt and Stream), read together.
func (s *Store) lastResponse(ctx context.Context, c *Config) error {
	st, err := s.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrUnavailable, streams.ResponsesStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrUnavailable, streams.ResponsesStream, err)
	}
	c.From, c.FromAt, c.Stream = info.State.LastSeq, 0, info.Created.UnixNano()
	if !info.State.LastTime.IsZero() {
		c.FromAt = info.State.LastTime.UnixNano()
	}
	return nil
}

// read returns the configs of a task key, their secrets opened (sl: the
// options' sealer), and the key's revision (0 when there is none).
func readConfigs(ctx context.Context, kv jetstream.KeyValue, key string, sl *sealer) (taskConfigs, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return taskConfigs{}, 0, nil
	}
	if err != nil {
		return taskConfigs{}, 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var tc taskConfigs
	if err := json.Unmarshal(e.Value(), &tc); err != nil {
		return taskConfigs{}, 0, fmt.Errorf("%w: key %s: %v", ErrUnavailable, key, err)
	}
	if err := sl.opened(&tc, key); err != nil {
		return taskConfigs{}, 0, fmt.Errorf("%w: key %s: %v", ErrUnavailable, key, err)
	}
	return tc, e.Revision(), nil
}

// encodeConfigs is tc as stored under task key: its secrets sealed (sl).
// A '<', '>' or '&' of a URL, token or credentials is stored as one byte
// (jsonstr.MarshalNoEscape), not six.
func encodeConfigs(tc taskConfigs, key string, sl *sealer) ([]byte, error) {
	return jsonstr.MarshalNoEscape(sl.sealed(tc, key))
}

// checkTaskBytes refuses (ErrLimit) the configs of a task whose JSON,
// unsealed, is over the bound (maxTaskBytes).
func (s *Store) checkTaskBytes(cs []Config) error {
	b, err := jsonstr.MarshalNoEscape(cs)
	if err != nil {
		return err
	}
	if limit := maxTaskBytes(s.o.maxPerTask); len(b) > limit {
		return fmt.Errorf("%w: the task's configs would take %d bytes, over %d (%d KiB a config on average)",
			ErrLimit, len(b), limit, taskBytesPerConfig>>10)
	}
	return nil
}

// Create stores c for principal's task c.TaskID, replacing the task's
// config of the same id (A2A's set), and returns it as stored: an id
// assigned when c.ID is empty, Version V1 when empty, Created and From set
// (updates stored before the call are not delivered to it, nor those
// stored during it that the stage took before the config was stored:
// startWritten). A config the
// same as the task's config of its id (sameTarget: URL, token,
// authentication, version) is that one, kept as it is stored (its Created,
// From and delivery position: a client setting it again loses no update).
// The URL rules are checked first (ErrURLRefused); other bad fields are
// ErrInvalidConfig; a full task or principal ErrLimit.
func (s *Store) Create(ctx context.Context, principal string, c Config) (Config, error) {
	c, _, changed, err := s.create(ctx, principal, c, false)
	if err == nil && changed {
		s.created(principal, c.TaskID)
	}
	return c, err
}

// OnCreate has f called with the principal and the task of each config a
// create stores (Create, CreateUndoable; not one it finds stored
// already), after it is stored: ingress keeps the configs of a task whose
// turn runs longer than the bucket's TTL (its records' keeper). f must
// not block.
func (s *Store) OnCreate(f func(principal, taskID string)) {
	s.hooks.Lock()
	defer s.hooks.Unlock()
	s.onCreate = append(s.onCreate, f)
}

// created calls the OnCreate functions for principal's new config of
// taskID.
func (s *Store) created(principal, taskID string) {
	s.hooks.Lock()
	fs := s.onCreate
	s.hooks.Unlock()
	for _, f := range fs {
		f(principal, taskID)
	}
}

// CreateUndoable is Create, also returning undo, which takes the call
// back: it removes the config, or puts back the config of its id that it
// replaced, unless the config was changed since (then undo does nothing).
// A front door stores a message's inline config before it publishes the
// message, so that the config sees its first frames, and undoes it when
// the publish is refused: a refused message registers nothing. undo's
// errors are ErrUnavailable's.
//
// A message's inline config comes again with each message of its task
// (the A2A clients send their configuration with every message): one
// without id that is the same as a config the task already has
// (sameTarget) is that config, answered with its id and kept as it is
// (undo then does nothing), not one more config per message.
func (s *Store) CreateUndoable(ctx context.Context, principal string, c Config) (Config, func(context.Context) error, error) {
	c, prev, changed, err := s.create(ctx, principal, c, true)
	if err != nil {
		return Config{}, nil, err
	}
	if !changed {
		return c, func(context.Context) error { return nil }, nil
	}
	s.created(principal, c.TaskID)
	return c, func(ctx context.Context) error { return s.undo(ctx, principal, c, prev) }, nil
}

// sameTarget reports whether a and b deliver alike: the same URL, token,
// authentication and version (both checked, so normalized).
func sameTarget(a, b Config) bool {
	return a.URL == b.URL && a.Token == b.Token && a.Version == b.Version &&
		(a.Auth == nil) == (b.Auth == nil) && (a.Auth == nil || *a.Auth == *b.Auth)
}

// create is Create, also returning the config it replaced (nil when the
// id was new) and whether it changed anything (false: the task's config
// it is the same as, returned as stored). anySame: a config without id
// is any of the task's configs it is the same as (CreateUndoable).
func (s *Store) create(ctx context.Context, principal string, c Config, anySame bool) (Config, *Config, bool, error) {
	if err := c.check(); err != nil {
		return Config{}, nil, false, err
	}
	err := s.o.urls.check(ctx, c.URL, s.o.log)
	if err != nil {
		return Config{}, nil, false, err
	}
	anySame = anySame && c.ID == ""
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	c.Created = s.now().UTC()
	if err = s.lastResponse(ctx, &c); err != nil {
		return Config{}, nil, false, err
	}
	if s.gap != nil {
		s.gap()
	}
	key := taskKey(principal, c.TaskID)
	reserved := "" // the slot this call took, while its key is not written
	for attempt := range casAttempts {
		if err := casBackoff(ctx, attempt); err != nil {
			return Config{}, nil, false, err
		}
		tc, rev, err := readConfigs(ctx, s.kv, key, s.o.sealer)
		if err != nil {
			return Config{}, nil, false, err
		}
		if reserved != "" && rev != 0 {
			// Another create wrote the key first: the slot is its.
			s.handOver(ctx, principal, c.TaskID, reserved, tc.Slot)
			reserved = ""
		}
		if anySame {
			if j := slices.IndexFunc(tc.Configs, func(x Config) bool { return sameTarget(x, c) }); j >= 0 {
				return tc.Configs[j], nil, false, nil
			}
		}
		var prev *Config
		i := slices.IndexFunc(tc.Configs, func(x Config) bool { return x.ID == c.ID })
		switch {
		case i >= 0 && sameTarget(tc.Configs[i], c):
			return tc.Configs[i], nil, false, nil
		case i >= 0:
			old := tc.Configs[i]
			prev = &old
			tc.Configs[i] = c
		case len(tc.Configs) >= s.o.maxPerTask:
			return Config{}, nil, false, fmt.Errorf("%w: task has %d configs", ErrLimit, len(tc.Configs))
		default:
			tc.Configs = append(tc.Configs, c)
			slices.SortFunc(tc.Configs, func(a, b Config) int { return cmpString(a.ID, b.ID) })
		}
		if err := s.checkTaskBytes(tc.Configs); err != nil {
			return Config{}, nil, false, err
		}
		if rev == 0 {
			if tc.Slot, err = s.reserve(ctx, principal, c.TaskID); err != nil {
				return Config{}, nil, false, err
			}
			reserved = tc.Slot
			if s.reserved != nil {
				if err := s.reserved(); err != nil {
					return Config{}, nil, false, err
				}
			}
		}
		ok, err := s.write(ctx, key, tc, rev)
		if err != nil {
			return Config{}, nil, false, err
		}
		if ok {
			return s.startWritten(ctx, principal, c, prev)
		}
	}
	return Config{}, nil, false, fmt.Errorf("%w: too many concurrent changes to the task's configs", ErrUnavailable)
}

// startWritten moves the start of c, just written in place of prev, to
// the stream's last message now. From was read before the write: a
// message stored in between may have been looked at by the stage before
// the config was there, and acked for no config, while From made it the
// config's (a later message of the task found it missing and a drain
// delivered it; after the task's last message nothing did). Read again
// after the write, every message past From is stored after the config
// and the stage sees the config when it takes it; one stored during the
// create was delivered, or is before the config. The From is moved
// while the config is still c (its Created and From); when it cannot be
// moved the create is taken back (undo) and fails: a config is stored
// only with a start that holds.
func (s *Store) startWritten(ctx context.Context, principal string, c Config, prev *Config) (Config, *Config, bool, error) {
	last := c
	err := s.lastResponse(ctx, &last)
	if err == nil && last.From == c.From && last.Stream == c.Stream {
		return c, prev, true, nil
	}
	key := taskKey(principal, c.TaskID)
	for attempt := 0; err == nil && attempt < casAttempts; attempt++ {
		if err = casBackoff(ctx, attempt); err != nil {
			break
		}
		tc, rev, rerr := readConfigs(ctx, s.kv, key, s.o.sealer)
		if rerr != nil {
			err = rerr
			break
		}
		j := slices.IndexFunc(tc.Configs, func(x Config) bool { return x.ID == c.ID })
		if j < 0 || !tc.Configs[j].Created.Equal(c.Created) || tc.Configs[j].From != c.From {
			return c, prev, true, nil // removed or changed since: not this call's any more
		}
		tc.Configs[j].From, tc.Configs[j].FromAt, tc.Configs[j].Stream = last.From, last.FromAt, last.Stream
		ok, werr := s.write(ctx, key, tc, rev)
		if ok {
			return tc.Configs[j], prev, true, nil
		}
		err = werr
	}
	if err == nil {
		err = fmt.Errorf("%w: too many concurrent changes to the task's configs", ErrUnavailable)
	}
	return Config{}, nil, false, errors.Join(err, s.undo(ctx, principal, c, prev))
}

// undo takes back the create that stored c in place of prev (nil: none):
// prev is put back, or c removed with its cursor, while the task's config
// of c's id is still c (its Created and From, which every create sets).
func (s *Store) undo(ctx context.Context, principal string, c Config, prev *Config) error {
	key := taskKey(principal, c.TaskID)
	for attempt := range casAttempts {
		if err := casBackoff(ctx, attempt); err != nil {
			return err
		}
		tc, rev, err := readConfigs(ctx, s.kv, key, s.o.sealer)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(tc.Configs, func(x Config) bool { return x.ID == c.ID })
		if i < 0 || !tc.Configs[i].Created.Equal(c.Created) || tc.Configs[i].From != c.From {
			return nil // removed or changed since: not this call's to take back
		}
		if prev != nil {
			tc.Configs[i] = *prev
			ok, err := s.write(ctx, key, tc, rev)
			if err != nil || ok {
				return err
			}
			continue
		}
		ok, err := s.remove(ctx, principal, c.TaskID, tc, rev, i)
		if err != nil {
			return err
		}
		if ok {
			_ = s.kv.Delete(ctx, configRef{principal, c.TaskID, c.ID}.cursorKey())
			return nil
		}
	}
	return fmt.Errorf("%w: too many concurrent changes to the task's configs", ErrUnavailable)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// write stores tc under key at revision rev (0: a new key); false when
// another writer changed the key first.
func (s *Store) write(ctx context.Context, key string, tc taskConfigs, rev uint64) (bool, error) {
	b, err := encodeConfigs(tc, key, s.o.sealer)
	if err != nil {
		return false, err
	}
	return s.put(ctx, key, b, rev)
}

// put stores b under key at revision rev (0: a new key): a
// compare-and-set, false when another writer changed the key first.
func (s *Store) put(ctx context.Context, key string, b []byte, rev uint64) (bool, error) {
	var err error
	if rev == 0 {
		_, err = s.kv.Create(ctx, key, b)
	} else {
		_, err = s.kv.Update(ctx, key, b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return true, nil
}

// Get returns principal's config id of task taskID, ErrNotFound when
// there is none (or it is another principal's).
func (s *Store) Get(ctx context.Context, principal, taskID, id string) (Config, error) {
	tc, _, err := readConfigs(ctx, s.kv, taskKey(principal, taskID), s.o.sealer)
	if err != nil {
		return Config{}, err
	}
	for _, c := range tc.Configs {
		if c.ID == id {
			return c, nil
		}
	}
	return Config{}, ErrNotFound
}

// List returns one page of principal's configs of task taskID, ordered by
// id, and the token of the next page ("" after the last). pageSize 0 is
// DefaultPageSize, more than MaxPageSize is MaxPageSize; a token List did
// not issue is ErrInvalidPageToken. A task without configs (or another
// principal's) lists nothing.
func (s *Store) List(ctx context.Context, principal, taskID string, pageSize int, pageToken string) ([]Config, string, error) {
	switch {
	case pageSize <= 0:
		pageSize = DefaultPageSize
	case pageSize > MaxPageSize:
		pageSize = MaxPageSize
	}
	after := ""
	if pageToken != "" {
		var err error
		if after, err = untok(pageToken); err != nil {
			return nil, "", ErrInvalidPageToken
		}
	}
	tc, _, err := readConfigs(ctx, s.kv, taskKey(principal, taskID), s.o.sealer)
	if err != nil {
		return nil, "", err
	}
	out := []Config{}
	for _, c := range tc.Configs {
		if pageToken != "" && c.ID <= after {
			continue
		}
		if len(out) == pageSize {
			return out, tok(out[len(out)-1].ID), nil
		}
		out = append(out, c)
	}
	return out, "", nil
}

// Delete removes principal's config id of task taskID and its delivery
// cursor; ErrNotFound when there is none. Updates of it already
// dead-lettered stay in E2A_PUSH_DEAD until their age ends (a redelivery
// drops them).
func (s *Store) Delete(ctx context.Context, principal, taskID, id string) error {
	return s.deleteIf(ctx, principal, taskID, id, func(Config) bool { return true })
}

// deleteIf is Delete of principal's config id of task taskID when it is
// one that is (the config as stored now); ErrNotFound when there is no
// such config.
func (s *Store) deleteIf(ctx context.Context, principal, taskID, id string, is func(Config) bool) error {
	key := taskKey(principal, taskID)
	for attempt := range casAttempts {
		if err := casBackoff(ctx, attempt); err != nil {
			return err
		}
		tc, rev, err := readConfigs(ctx, s.kv, key, s.o.sealer)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(tc.Configs, func(x Config) bool { return x.ID == id })
		if i < 0 || !is(tc.Configs[i]) {
			return ErrNotFound
		}
		ok, err := s.remove(ctx, principal, taskID, tc, rev, i)
		if err != nil {
			return err
		}
		if ok {
			_ = s.kv.Delete(ctx, configRef{principal, taskID, id}.cursorKey())
			return nil
		}
	}
	return fmt.Errorf("%w: too many concurrent changes to the task's configs", ErrUnavailable)
}

// deleteSent deletes ref's config as Delete does, only when it is still
// sent, the config an update was posted to (its Created time), not one
// set again under its id since; ErrNotFound otherwise. The stage and a
// redelivery call it when the webhook answered 410 Gone.
func (s *Store) deleteSent(ctx context.Context, ref configRef, sent Config) error {
	return s.deleteIf(ctx, ref.principal, ref.taskID, ref.id, func(c Config) bool { return c.Created.Equal(sent.Created) })
}

// remove stores tc without its config i under principal's task key of
// taskID at revision rev (the key deleted, and its slot given back, when
// none is left); false when another writer changed the key first.
func (s *Store) remove(ctx context.Context, principal, taskID string, tc taskConfigs, rev uint64, i int) (bool, error) {
	key := taskKey(principal, taskID)
	tc.Configs = slices.Delete(tc.Configs, i, i+1)
	if len(tc.Configs) > 0 {
		return s.write(ctx, key, tc, rev)
	}
	err := s.kv.Delete(ctx, key, jetstream.LastRevision(rev))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s.release(ctx, principal, taskID, tc.Slot)
	return true, nil
}

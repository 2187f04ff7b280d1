package push

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// DeadLetter is a task update the stage gave up on, as E2A_PUSH_DEAD
// holds it: the update's body and ids, never the config's token or
// credentials (a redelivery reads them from the config).
type DeadLetter struct {
	// Seq is its sequence in E2A_PUSH_DEAD (set when read).
	Seq       uint64    `json:"-"`
	Principal string    `json:"principal"`
	TaskID    string    `json:"task_id"`
	ConfigID  string    `json:"config_id"`
	EventID   string    `json:"event_id"`
	RequestID string    `json:"request_id"`
	Version   string    `json:"version"`
	Reason    string    `json:"reason"`
	Status    int       `json:"status,omitempty"`
	Attempts  int       `json:"attempts,omitempty"`
	Failing   time.Time `json:"failing_since,omitzero"`
	DeadAt    time.Time `json:"dead_at"`
	// Body is the update as it was posted; null when it was too large to
	// post (over WithMaxBody) or to keep (BodyBytes then says its size,
	// Reason starts with ReasonTooLarge): such an update is never
	// redelivered.
	Body      json.RawMessage `json:"body"`
	BodyBytes int             `json:"body_bytes,omitempty"`
}

// ReasonTooLarge starts the reason of an update dead-lettered without
// its body because it is larger than a delivery may be (WithMaxBody) or
// a dead letter may hold: it can never be posted as it is.
const ReasonTooLarge = "too_large"

// deadSlack is room for a dead letter's headers (its message id) within
// the server's max_payload.
const deadSlack = 1 << 10

func bindDead(ctx context.Context, js jetstream.JetStream, cfg streams.Config) error {
	_, err := js.Stream(ctx, streams.PushDeadStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, cfg.PushDeadStreamConfig())
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrUnavailable, streams.PushDeadStream, err)
	}
	return nil
}

// deadLetter stores ev for it's config in E2A_PUSH_DEAD (once: the
// message id is the config's and the event's), within its principal's
// share of the stream (storeDead). An update larger than a delivery may
// be (WithMaxBody) can never be posted as it is: it is dead-lettered
// without its body (its size in BodyBytes, ReasonTooLarge), as is one
// that a dead letter could not hold.
func (s *stage) deadLetter(it item, ev event, reason string, status int, cur cursor) error {
	d := DeadLetter{Principal: it.ref.principal, TaskID: it.ref.taskID, ConfigID: it.ref.id, EventID: ev.id,
		RequestID: it.job.m.requestID, Version: it.cfg.Version, Reason: reason, Status: status,
		Attempts: cur.Attempts, Failing: cur.FailingSince, DeadAt: time.Now().UTC(), Body: ev.body(it.cfg.Version)}
	if n := len(d.Body); n > s.o.maxBody {
		d.BodyBytes, d.Body = n, nil
		if !strings.HasPrefix(reason, ReasonTooLarge) {
			// Dead-lettered for another reason (the config is in
			// dead-letter mode): that one is kept after.
			d.Reason = tooLarge(n, s.o.maxBody) + " (" + reason + ")"
		}
		d.Reason += "; its body is not kept"
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if limit := s.nc.MaxPayload() - deadSlack; int64(len(b)) > limit {
		// An update this large (a v0.3 Task grows with its answer) would
		// never be stored, and the config would wait on it for ever: the
		// dead letter keeps everything but the body.
		d.BodyBytes, d.Body = len(d.Body), nil
		d.Reason = fmt.Sprintf("%s: the body, %d bytes, is not kept: a dead letter is at most the server's max_payload (%s)",
			ReasonTooLarge, d.BodyBytes, d.Reason)
		if b, err = json.Marshal(d); err != nil {
			return err
		}
	}
	if err := s.storeDead(it.ref.principal, it.ref.deadSubject(), it.ref.tokens()+":"+ev.id, b); err != nil {
		return err
	}
	s.metrics.dead.Inc()
	return nil
}

// tooLarge is the reason of an update over the delivery limit.
func tooLarge(n, limit int) string {
	return fmt.Sprintf("%s: update of %d bytes over the %d-byte limit", ReasonTooLarge, n, limit)
}

// DeadFilter selects dead-lettered updates: every one (zero value), a
// principal's, a principal's task's, or one config's. TaskID needs
// Principal, ConfigID needs both.
type DeadFilter struct {
	Principal, TaskID, ConfigID string
	// All selects every principal's updates (Principal must be empty);
	// without it an empty Principal is the anonymous principal's.
	All bool
}

func (f DeadFilter) subject() (string, error) {
	switch {
	case f.All && (f.Principal != "" || f.TaskID != "" || f.ConfigID != ""):
		return "", fmt.Errorf("%w: All with a principal, task or config", ErrInvalidOption)
	case f.All:
		return streams.PushDeadSubjects, nil
	case f.TaskID == "" && f.ConfigID != "":
		return "", fmt.Errorf("%w: a config id without its task", ErrInvalidOption)
	case f.TaskID == "":
		return "e2a.push.dead." + tok(f.Principal) + ".>", nil
	case f.ConfigID == "":
		return "e2a.push.dead." + tok(f.Principal) + "." + tok(f.TaskID) + ".*", nil
	}
	return configRef{f.Principal, f.TaskID, f.ConfigID}.deadSubject(), nil
}

// ListDead returns up to limit (1..10000) dead-lettered updates matching
// f, oldest first. Options: none are read but WithStreamsConfig (the
// stream is created when missing).
func ListDead(ctx context.Context, nc *nats.Conn, f DeadFilter, limit int, opts ...Option) ([]DeadLetter, error) {
	if nc == nil || limit < 1 || limit > 10000 {
		return nil, fmt.Errorf("%w: nil connection or limit %d (1..10000)", ErrInvalidOption, limit)
	}
	subj, err := f.subject()
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := bindDead(ctx, js, o.streams); err != nil {
		return nil, err
	}
	return readDead(ctx, nc, subj, limit)
}

// RedeliverReport says what a redelivery did.
type RedeliverReport struct {
	// Delivered updates were accepted by their webhooks and removed.
	Delivered int
	// Dropped updates belonged to a config that no longer exists (deleted,
	// or set again under its id as another A2A version, whose body they
	// are not); removed.
	Dropped int
	// Kept updates are still dead-lettered: their webhook failed (the
	// first failure of a config stops its updates, keeping their order).
	Kept int
	// TooLarge updates were dead-lettered without their body, too large
	// to post (ReasonTooLarge) or to keep: never posted (named in
	// Failures); removed.
	TooLarge int
	// Failures names each config that failed and why (no credentials).
	Failures []string
}

// Redeliver posts the dead-lettered updates matching f to their configs'
// webhooks, each config's in order, once each (an update whose webhook
// fails stays, with the ones after it), with the config's current
// token and authentication and the update's original event id; an
// update of a config that no longer exists, or that was set again under
// its id as another A2A version than the update's body, is dropped, and
// so are a config's updates left once its webhook answers 410 Gone: the
// config is deleted, as the stage deletes it. A config
// whose updates are all redelivered leaves dead-letter mode: the stage
// delivers its next updates to the webhook again. Options: the URL rules
// (WithAllowHosts, WithResolver), WithTimeout, WithMaxBody.
func Redeliver(ctx context.Context, nc *nats.Conn, f DeadFilter, opts ...Option) (RedeliverReport, error) {
	var rep RedeliverReport
	all, err := ListDead(ctx, nc, f, 10000, opts...)
	if err != nil {
		return rep, err
	}
	o, _ := buildOptions(opts)
	js, kv, err := openBucket(ctx, nc, o.streams)
	if err != nil {
		return rep, err
	}
	stream, err := js.Stream(ctx, streams.PushDeadStream)
	if err != nil {
		return rep, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r := redelivery{ctx: ctx, nc: nc, kv: kv, store: storeOver(js, kv, o), stream: stream, o: o, client: o.httpClient(), rep: &rep}
	groups := map[configRef][]DeadLetter{}
	var order []configRef
	for _, d := range all {
		ref := configRef{d.Principal, d.TaskID, d.ConfigID}
		if _, ok := groups[ref]; !ok {
			order = append(order, ref)
		}
		groups[ref] = append(groups[ref], d)
	}
	for _, ref := range order {
		if err := r.config(ref, groups[ref]); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

type redelivery struct {
	ctx    context.Context
	nc     *nats.Conn
	kv     jetstream.KeyValue
	store  *Store // of kv: the configs read and deleted
	stream jetstream.Stream
	o      options
	client *http.Client
	rep    *RedeliverReport
}

func (r *redelivery) config(ref configRef, ds []DeadLetter) error {
	cfg, err := r.store.Get(r.ctx, ref.principal, ref.taskID, ref.id)
	if errors.Is(err, ErrNotFound) {
		for _, d := range ds {
			if err := r.remove(d.Seq); err != nil {
				return err
			}
			r.rep.Dropped++
		}
		return nil
	}
	if err != nil {
		return err
	}
	for i, d := range ds {
		if cmp.Or(d.Version, V1) != cfg.Version {
			// Dead-lettered for an earlier config of the id, set again
			// since as another A2A version: the body is the old version's
			// (a v0.3 Task is no v1.0 StreamResponse), and the config
			// that replaced it starts afresh (cursor.forConfig). Dropped,
			// as for a deleted config.
			if err := r.remove(d.Seq); err != nil {
				return err
			}
			r.rep.Dropped++
			continue
		}
		if kept := len(d.Body) > 0 && string(d.Body) != "null"; !kept || len(d.Body) > r.o.maxBody {
			// Dead-lettered without its body (too large to post or to
			// keep), or kept by an earlier version and over the limit:
			// never posted (no empty body), removed.
			size := len(d.Body)
			if !kept {
				size = d.BodyBytes
			}
			if err := r.remove(d.Seq); err != nil {
				return err
			}
			r.rep.TooLarge++
			r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%s: update %s skipped (%s, %d bytes): it cannot be posted as it is; removed",
				cfg.String(), d.EventID, ReasonTooLarge, size))
			continue
		}
		out := postUpdate(r.ctx, r.client, r.o, cfg, d.EventID, d.Body)
		if out.gone {
			return r.gone(ref, cfg, ds[i:])
		}
		if !out.ok {
			r.rep.Kept += len(ds) - i
			r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%s: %s", cfg.String(), out.reason))
			return nil
		}
		if err := r.remove(d.Seq); err != nil {
			return err
		}
		r.rep.Delivered++
	}
	return r.revive(ref)
}

// gone deletes ref's config cfg, whose webhook answered a redelivered
// update 410 Gone, as the stage does (Store.deleteSent: only the config
// posted to, not one set again under its id since), and drops its
// updates left, ds, as a deleted config's are (Dropped, one line in
// Failures). Not deleted (the bucket unavailable), they are kept.
func (r *redelivery) gone(ref configRef, cfg Config, ds []DeadLetter) error {
	err := r.store.deleteSent(r.ctx, ref, cfg)
	if err != nil && !errors.Is(err, ErrNotFound) {
		r.rep.Kept += len(ds)
		r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%s: webhook answered 410 Gone; the config could not be deleted: %v", cfg.String(), err))
		return nil
	}
	for _, d := range ds {
		if err := r.remove(d.Seq); err != nil {
			return err
		}
		r.rep.Dropped++
	}
	r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%s: webhook answered 410 Gone; config deleted, its %d updates left dropped",
		cfg.String(), len(ds)))
	return nil
}

func (r *redelivery) remove(seq uint64) error {
	err := r.stream.DeleteMsg(r.ctx, seq)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// revive takes ref's cursor out of dead-letter mode once no update of
// ref is left in E2A_PUSH_DEAD: the cursor's revision is read before the
// stream is, so an update the stage dead-letters meanwhile (it stores
// the update, then moves the cursor) makes the write fail and the
// updates are delivered first. A write another writer came first on is
// tried again after casBackoff, up to 8 times.
func (r *redelivery) revive(ref configRef) error {
	for attempt := range 8 {
		if err := casBackoff(r.ctx, attempt); err != nil {
			return err
		}
		cur, rev, err := readCursor(r.ctx, r.kv, ref.cursorKey())
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if !cur.Dead || rev == 0 {
			return nil
		}
		left, err := r.left(ref)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return r.config(ref, left)
		}
		cur.Dead = false
		_, err = writeCursor(r.ctx, r.kv, ref.cursorKey(), cur, rev)
		if !errors.Is(err, errMoved) {
			return err
		}
	}
	return nil
}

// left reads ref's dead-lettered updates.
func (r *redelivery) left(ref configRef) ([]DeadLetter, error) {
	return readDead(r.ctx, r.nc, ref.deadSubject(), 10000)
}

// readDead reads up to limit dead-lettered updates under subj.
func readDead(ctx context.Context, nc *nats.Conn, subj string, limit int) ([]DeadLetter, error) {
	out := []DeadLetter{}
	for raw, err := range streams.DirectGetSeq(ctx, nc, streams.PushDeadStream, subj, 0, 256) {
		if err != nil {
			return out, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		var d DeadLetter
		if json.Unmarshal(raw.Data, &d) != nil {
			continue
		}
		d.Seq = raw.Seq
		out = append(out, d)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

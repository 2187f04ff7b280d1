package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The claim of an A2A context id (KindContext: claimContext) says whose
// conversation the context is. Like every record of E2A_TASKS it expires
// TasksTTL after its last write, and the records of the context's tasks
// are written by their turns, not by it: were it written once, it would
// expire while a task of the context goes on, and another principal could
// then claim the context id. So the tasks keep it: a write of a task
// (appendAfter, appendNew) whose claim may be older than contextRefresh
// reads it and writes it again if it is (keepContext), and a new task of
// the context (claimContext, which reads it anyway) writes it again past
// half of that. The claim is then never older than contextRefresh at a
// write of one of its tasks, and outlives the task's requests in the hot
// streams (contextRefresh). Each task keeps when it last found the claim
// written (TaskRecord.ContextClaimed), so that most of its writes read
// nothing more: one read of the claim per task and contextRefresh (24 h
// with the defaults) at most, one write per context and contextRefresh.

// keepContext keeps the claim of the A2A context of the task rec alive
// (see above): when rec.ContextClaimed is older than contextRefresh (or
// unknown), it refreshes the claim (refreshContext) and notes in rec when
// it was written. Nothing for a session, a task without a context, or with
// authentication off (no claims are made).
func (s *TaskStore) keepContext(ctx context.Context, kind string, rec *TaskRecord, by tenant.Principal, now time.Time) error {
	if kind != KindTask || rec.ContextID == "" || by.Open || s.contextRefresh < 0 {
		return nil
	}
	if at, err := e2a.ParseTime(rec.ContextClaimed); err == nil && now.Sub(at) <= s.contextRefresh {
		return nil
	}
	// A claim that expired is made again as the conversation's owner's:
	// for a task an admin started in another principal's context, that
	// principal's (TaskRecord.Owner), not the admin's.
	_, at, err := s.refreshContext(ctx, rec.ContextID, cmp.Or(rec.Owner, rec.Principal), now, s.contextRefresh)
	if err != nil {
		return fmt.Errorf("ingress: context %q of task %q: %w", rec.ContextID, rec.ID, err)
	}
	rec.ContextClaimed = e2a.FormatTime(at)
	return nil
}

// keepClaim writes the claim of the A2A context contextID again, as it
// is (Updated now), when it was last written after ago or longer: the
// claim of a one-turn task's context, which no record keeps
// (keepContext), while the task's turn runs (Server.keepRecord). A
// compare-and-set on the revision read: a claim that is gone (expired,
// taken back: dropContext) is not made again, and one written meanwhile
// is left to that write.
func (s *TaskStore) keepClaim(ctx context.Context, contextID string, after time.Duration) error {
	key, err := taskKey(KindContext, contextID)
	if err != nil {
		return nil
	}
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil
	case err != nil:
		return err
	}
	now := s.now()
	if now.Sub(e.Created()) < after {
		return nil
	}
	rec, err := decodeRecord(key, e.Value())
	if err != nil {
		return err
	}
	rec.Updated = e2a.FormatTime(now)
	_, err = s.update(ctx, key, rec, e.Revision())
	return err
}

// dropContext takes back the claim of the A2A context contextID that
// claimContext made at revision rev, unless written again since (a
// compare-and-purge on rev: the claim and its revisions go, one purge
// marker is left, under TasksTTL as any record). Only for a claim nobody
// else can rely on: one of a context id the pipeline made up for a
// submission that then published nothing (Server.submit).
func (s *TaskStore) dropContext(ctx context.Context, contextID string, rev uint64) error {
	key, err := taskKey(KindContext, contextID)
	if err != nil {
		return err
	}
	if err := s.kv.Purge(ctx, key, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return err
	}
	return nil
}

// claimedBefore is TaskRecord.ContextClaimed for the record of a task
// whose first turn, at time at, claimed the context contextID
// (claimContext, which leaves the claim at most half of contextRefresh
// old).
func (s *TaskStore) claimedBefore(contextID string, at time.Time) string {
	if contextID == "" || s.contextRefresh < 0 {
		return ""
	}
	return e2a.FormatTime(at.Add(-s.contextRefresh / 2))
}

// refreshContext reads the claim of the A2A context contextID and writes
// it again (a compare-and-set on its revision) when it was written more
// than maxAge ago (never when maxAge is negative: records do not expire),
// or creates it as principal's when there is none (it
// expired, or was never made); it returns the claim's owner and when it
// was last written. A claim changes owner only by expiring: the refresh
// keeps the owner it reads.
func (s *TaskStore) refreshContext(ctx context.Context, contextID, principal string, now time.Time, maxAge time.Duration) (string, time.Time, error) {
	key, err := taskKey(KindContext, contextID)
	if err != nil {
		return "", time.Time{}, err
	}
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			data, _ := json.Marshal(contextRecord(contextID, principal, now))
			if err = s.create(ctx, key, data); err == nil {
				return principal, now, nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return "", time.Time{}, err
			}
			// Made meanwhile, or the get was answered by a replica a write
			// behind: the bucket's leader has it.
			value, err := s.leaderValue(ctx, key)
			if err != nil || value == nil {
				if err == nil {
					continue // deleted again
				}
				return "", time.Time{}, err
			}
			got, err := decodeRecord(key, value)
			if err != nil {
				return "", time.Time{}, err
			}
			at, _ := e2a.ParseTime(got.Updated)
			return got.Principal, at, nil
		}
		if err != nil {
			return "", time.Time{}, err
		}
		got, err := decodeRecord(key, e.Value())
		if err != nil {
			return "", time.Time{}, err
		}
		if at, err := e2a.ParseTime(got.Updated); maxAge < 0 || (err == nil && now.Sub(at) <= maxAge) {
			return got.Principal, at, nil
		}
		got.Updated = e2a.FormatTime(now)
		if ok, err := s.update(ctx, key, got, e.Revision()); err != nil {
			return "", time.Time{}, err
		} else if ok {
			return got.Principal, now, nil
		}
	}
	return "", time.Time{}, fmt.Errorf("ingress: context %s: too many concurrent updates", key)
}

// contextRecord is the claim of the A2A context id by principal, written
// at now.
func contextRecord(id, principal string, now time.Time) TaskRecord {
	at := e2a.FormatTime(now)
	return TaskRecord{ID: id, Protocol: "a2a", Principal: principal, RequestIDs: []string{}, Created: at, Updated: at}
}

// decodeRecord decodes the record stored under key.
func decodeRecord(key string, data []byte) (*TaskRecord, error) {
	var rec TaskRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("ingress: task record %s: %w", key, err)
	}
	return &rec, nil
}

package workflow

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StoreScope identifies who stores data.
type StoreScope struct {
	Principal string
	// RequestID is the execution's request id (sessionStorage scope).
	RequestID string
}

// Storage persists StoreData values.
type Storage interface {
	// Kinds lists the storage types it serves (localStorage,
	// sessionStorage, file).
	Kinds() []string
	// Store writes value (JSON-encoded as data) under key and returns
	// where it went, for the operation's result.
	Store(ctx context.Context, scope StoreScope, kind, key string, data []byte) (location string, err error)
}

// ErrValidateOnly is the error of [StorageKinds]' Store: the executor that
// holds it validates, another one runs the workflows and stores.
var ErrValidateOnly = errors.New("workflow: this executor only validates; the executor that runs the workflow stores")

// StorageKinds is a Storage that only names storage types: those of the
// executor that runs the workflows, for one that validates for it
// (Options.ValidateOnly; `e2a serve` in front of the workflow pool) without
// opening the pool's buckets. Store always fails with ErrValidateOnly.
type StorageKinds []string

// Kinds implements Storage.
func (k StorageKinds) Kinds() []string { return slices.Clone([]string(k)) }

// Store implements Storage: it stores nothing.
func (StorageKinds) Store(context.Context, StoreScope, string, string, []byte) (string, error) {
	return "", ErrValidateOnly
}

// Stores maps StoreData's storage types onto the pipeline:
//
//   - localStorage → the JetStream KV bucket Local, key
//     "<principal>.<key>": kept across executions, private to a principal.
//   - sessionStorage → the KV bucket Session, key
//     "<principal>.<request id>.<key>": one execution's scratch space; give
//     the bucket a short MaxAge (e.g. one hour) so sessions expire.
//   - file → a file "<principal>/<key>" under Dir, opened through os.Root so
//     that no key (or symlink) can leave the directory.
//
// A nil bucket or an empty Dir disables that type; validation then refuses
// StoreData operations using it. Principals and request ids that are not
// plain tokens are written as "~" + base64url.
//
// localStorage has a per-principal quota (LocalQuota, [Stores.DeleteLocal]):
// the bucket's bound is shared and nothing in it expires, so without one a
// single principal could fill it and fail every other principal's StoreData.
// sessionStorage has one too (SessionQuota): its keys expire, but a
// principal filling the bucket failed everyone's for up to its TTL.
type Stores struct {
	Local   jetstream.KeyValue
	Session jetstream.KeyValue
	Dir     string
	// LocalQuota bounds the bytes one principal keeps in Local, each key
	// counted as its name, its value and 64 bytes. 0 is the bucket's
	// MaxBytes / [DefaultLocalQuotaShare] (none when the bucket is
	// unbounded); negative is none. The count is kept in the bucket
	// (key "=usage.<principal>"), shared by every worker.
	LocalQuota int64

	// SessionQuota bounds the bytes one principal writes to Session
	// within the bucket's TTL (its keys' lifetime), each key counted as in
	// LocalQuota, every write in full (see sessionquota.go for why). 0 is
	// the bucket's MaxBytes / [DefaultLocalQuotaShare] (none when the
	// bucket is unbounded); negative is none. The count is kept in the
	// bucket (key "=usage.<principal>").
	SessionQuota int64

	localLimits, sessionLimits atomic.Pointer[bucketLimits] // resolved from the buckets' status
	now                        func() time.Time             // the sessionStorage quota's clock; nil: time.Now
}

// Kinds implements Storage.
func (s *Stores) Kinds() []string {
	var out []string
	if s == nil {
		return out
	}
	if s.Local != nil {
		out = append(out, StorageLocal)
	}
	if s.Session != nil {
		out = append(out, StorageSession)
	}
	if s.Dir != "" {
		out = append(out, StorageFile)
	}
	return out
}

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// scopeToken writes an id as one KV key token / one directory name.
func scopeToken(id string) string {
	if id == "" {
		return "_"
	}
	if tokenPattern.MatchString(id) {
		return id
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// Store implements Storage.
func (s *Stores) Store(ctx context.Context, scope StoreScope, kind, key string, data []byte) (string, error) {
	if msg := checkStoreKey(key); msg != "" {
		return "", dataError("storage key %q %s", key, msg)
	}
	switch kind {
	case StorageLocal, StorageSession:
		kv := s.Local
		k := scopeToken(scope.Principal) + "." + key
		if kind == StorageSession {
			kv = s.Session
			k = scopeToken(scope.Principal) + "." + scopeToken(scope.RequestID) + "." + key
		}
		if kv == nil {
			return "", permissionError("storage %s is not enabled on this server", kind)
		}
		var err error
		if kind == StorageLocal {
			err = s.putLocal(ctx, scopeToken(scope.Principal), k, data)
		} else {
			err = s.putSession(ctx, scopeToken(scope.Principal), k, data)
		}
		if err != nil {
			return "", storeError(kind, key, err)
		}
		return "kv:" + kv.Bucket() + "/" + k, nil
	case StorageFile:
		if s.Dir == "" {
			return "", permissionError("storage file is not enabled on this server")
		}
		root, err := os.OpenRoot(s.Dir)
		if err != nil {
			return "", newError(ExecutionError, "file storage is unavailable")
		}
		defer root.Close()
		rel := filepath.Join(scopeToken(scope.Principal), filepath.FromSlash(key))
		if dir := filepath.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o750); err != nil {
				return "", newError(ExecutionError, "file storage: cannot create %s: %v", filepath.ToSlash(dir), stripDir(err, s.Dir))
			}
		}
		if err := root.WriteFile(rel, data, 0o640); err != nil {
			return "", newError(ExecutionError, "file storage: cannot write %s: %v", filepath.ToSlash(rel), stripDir(err, s.Dir))
		}
		return "file:" + filepath.ToSlash(rel), nil
	}
	return "", newError(ValidationError, "unknown storage %q", kind)
}

// stripDir keeps the server's directory out of error messages.
func stripDir(err error, dir string) string {
	return strings.ReplaceAll(err.Error(), dir, "…")
}

func encodeStored(v any) ([]byte, error) {
	return json.Marshal(v)
}

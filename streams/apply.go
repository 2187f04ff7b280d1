package streams

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

// Action is what Apply did to a stream or bucket.
type Action string

// Actions reported by Apply.
const (
	ActionCreated   Action = "created"
	ActionUpdated   Action = "updated"
	ActionUnchanged Action = "unchanged"
	// ActionFailed: the resource could not be created or updated; see
	// Change.Err.
	ActionFailed Action = "failed"
)

// Resource kinds in a Report.
const (
	KindStream   = "stream"
	KindKeyValue = "kv"
)

// Change is what Apply found and did for one stream or bucket.
type Change struct {
	// Kind is KindStream or KindKeyValue.
	Kind string
	// Name is the stream name or the bucket name.
	Name   string
	Action Action
	// Drift lists the fields that differed from the definition before the
	// update, as "Field: have -> want".
	Drift []string
	// Err is set when Action is ActionFailed.
	Err error
}

// Report lists one Change per stream and bucket, in the order applied.
type Report struct {
	Changes []Change
}

// Changed reports whether anything was created or updated.
func (r Report) Changed() bool {
	for _, c := range r.Changes {
		if c.Action == ActionCreated || c.Action == ActionUpdated {
			return true
		}
	}
	return false
}

// Get returns the change of the stream or bucket called name.
func (r Report) Get(name string) (Change, bool) {
	for _, c := range r.Changes {
		if c.Name == name {
			return c, true
		}
	}
	return Change{}, false
}

// String renders the report, one resource a line.
func (r Report) String() string {
	var b strings.Builder
	for _, c := range r.Changes {
		fmt.Fprintf(&b, "%s %s: %s", c.Kind, c.Name, c.Action)
		if len(c.Drift) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(c.Drift, "; "))
		}
		if c.Err != nil {
			fmt.Fprintf(&b, ": %v", c.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

type applyOptions struct {
	extraKV      []jetstream.KeyValueConfig
	extraStreams []jetstream.StreamConfig
}

// ApplyOption configures Apply.
type ApplyOption func(*applyOptions) error

// WithKeyValue makes Apply also provision bucket cfg (see
// Config.KeyValueConfig).
func WithKeyValue(cfg jetstream.KeyValueConfig) ApplyOption {
	return func(o *applyOptions) error {
		if !validBucket.MatchString(cfg.Bucket) {
			return fmt.Errorf("%w: bucket name %q", ErrInvalidOptions, cfg.Bucket)
		}
		o.extraKV = append(o.extraKV, cfg)
		return nil
	}
}

// WithStream makes Apply also provision stream cfg (as
// Config.PushDeadStreamConfig). It returns ErrInvalidOptions for a name
// that is not a valid stream name or a stream without subjects.
func WithStream(cfg jetstream.StreamConfig) ApplyOption {
	return func(o *applyOptions) error {
		if !validBucket.MatchString(cfg.Name) || len(cfg.Subjects) == 0 {
			return fmt.Errorf("%w: stream %q with subjects %q", ErrInvalidOptions, cfg.Name, cfg.Subjects)
		}
		o.extraStreams = append(o.extraStreams, cfg)
		return nil
	}
}

// Apply creates every stream and bucket of cfg that does not exist and
// updates those that differ from their definition; it leaves equal ones
// alone, so it can run at every start-up.
//
// It goes on after a failure and returns the joined errors with the full
// Report. It returns ErrInvalidConfig when cfg is invalid (before touching
// the server), ErrInvalidOptions for an invalid option, and, for a resource
// that differs in a field the server cannot update, an error wrapping
// ErrDriftNotUpdatable (that resource is left unchanged and reported as
// ActionFailed with its drift). Other errors come from the server; a
// create or update that a cluster refuses as not ready to place it (no
// suitable peers, no meta leader: a cluster that has just started) is
// tried again, backing off, for up to 30 s before its error is reported.
func Apply(ctx context.Context, js jetstream.JetStream, cfg Config, opts ...ApplyOption) (Report, error) {
	var o applyOptions
	if err := option.Apply(ErrInvalidOptions, &o, opts); err != nil {
		return Report{}, err
	}
	streams, err := cfg.StreamConfigs()
	if err != nil {
		return Report{}, err
	}
	kvs, err := cfg.KeyValueConfigs()
	if err != nil {
		return Report{}, err
	}
	kvs = append(kvs, o.extraKV...)
	streams = append(streams, o.extraStreams...)

	var (
		rep  Report
		errs []error
	)
	w := &writer{js: js}
	for _, want := range streams {
		c := applyStream(ctx, w, want)
		rep.Changes = append(rep.Changes, c)
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", c.Name, c.Err))
		}
	}
	for _, want := range kvs {
		c := applyKeyValue(ctx, w, want)
		rep.Changes = append(rep.Changes, c)
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("kv %s: %w", c.Name, c.Err))
		}
	}
	return rep, errors.Join(errs...)
}

// The JetStream API errors of a cluster not ready to place a replicated
// stream: no suitable peers (a peer not yet, or for a moment no longer, seen
// current by the meta leader, as while the servers of a cluster that has
// just started connect their routes) and the cluster not available (no meta
// leader yet).
const (
	errCodeNoSuitablePeers     jetstream.ErrorCode = 10005
	errCodeClusterNotAvailable jetstream.ErrorCode = 10008
)

// placementRetry is how RetryPlacement backs off (each attempt bounded by
// attempt, the JetStream API's own default): from first, doubling up
// to max, for at most within in all.
var placementRetry = struct{ first, max, within, attempt time.Duration }{250 * time.Millisecond, 2 * time.Second, 30 * time.Second, 5 * time.Second}

// RetryPlacement runs call, a create or update, again while the cluster
// refuses it as not ready to place it (transientPlacement), backing off
// (placementRetry) for up to 30 s or until ctx is done: `e2a streams
// apply` run as the cluster starts (a Kubernetes Job beside the NATS pods)
// waits for it instead of failing, and so does a stage that creates or
// updates its own bucket at start-up while a server of the cluster is
// (re)starting ("no suitable peers for placement, peer offline"). Any
// other error, or the last refusal, is returned.
func RetryPlacement(ctx context.Context, call func(ctx context.Context) error) error {
	wait, deadline := placementRetry.first, time.Now().Add(placementRetry.within)
	for {
		// Each attempt has its own timeout: a request the cluster drops
		// (no meta leader) is otherwise answered by nothing until ctx's
		// own deadline, and never tried again.
		actx, cancel := context.WithTimeout(ctx, placementRetry.attempt)
		err := call(actx)
		cancel()
		if err == nil || !transientPlacement(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, placementRetry.max)
	}
}

// transientPlacement reports whether err is the cluster refusing a
// placement for now (errCodeNoSuitablePeers, errCodeClusterNotAvailable),
// or the API request timing out (its answer late or lost: a cluster under
// load creating a replicated stream took longer than the request's 5 s
// once, in CI). Create and update are idempotent with the same
// configuration, so they are sent again; a done context still ends the
// retries (RetryPlacement).
func transientPlacement(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == errCodeNoSuitablePeers || apiErr.ErrorCode == errCodeClusterNotAvailable
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// writer sends Apply's creates and updates, and stops sending them once the
// server refused one to the connection's user (ErrNotPermitted): the
// refused request is answered by nothing but its timeout, so each would
// have waited for it, again for the 30 s of RetryPlacement (a stage of a
// newer build started on the streams of an earlier one as its NATS user
// exited after 2 minutes, "context deadline exceeded").
type writer struct {
	js     jetstream.JetStream
	denied error
}

// call is the create or update call of stream name (api: "CREATE" or
// "UPDATE"), returning ErrNotPermitted without sending it once one was
// refused, or when the server refused this one: its request timed out and
// the connection's last error is the server refusing the publish to its
// API subject ($JS.API.STREAM.<api>.<name>, under any API prefix).
func (w *writer) call(api, name string, call func(ctx context.Context) error) func(ctx context.Context) error {
	subject := "STREAM." + api + "." + name + `"`
	return func(ctx context.Context) error {
		if w.denied != nil {
			return w.denied
		}
		err := call(ctx)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if last := w.js.Conn().LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), subject) {
			w.denied = fmt.Errorf("%w (%v)", ErrNotPermitted, last)
			return w.denied
		}
		return err
	}
}

func applyStream(ctx context.Context, w *writer, want jetstream.StreamConfig) Change {
	js := w.js
	c := Change{Kind: KindStream, Name: want.Name}
	s, err := streamInfo(ctx, js, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return created(ctx, c, w.call("CREATE", want.Name, func(ctx context.Context) error { _, err := js.CreateStream(ctx, want); return err }))
	}
	if err != nil {
		c.Action, c.Err = ActionFailed, err
		return c
	}
	have := s.CachedInfo().Config
	// A stream's persist mode is fixed at its creation and changes only
	// how soon its writes reach the disk: a stream created by an earlier
	// definition keeps its mode instead of failing the whole apply.
	want.PersistMode = have.PersistMode
	var fixed []string
	c.Drift, fixed = streamDrift(have, want, nil)
	if have.PersistMode == jetstream.AsyncPersistMode && want.Replicas > 1 && have.Replicas != want.Replicas {
		// The server refuses to replicate a stream in async persist mode
		// and to change the mode of a stream.
		fixed = append(fixed, fmt.Sprintf("Replicas: %d -> %d (the stream is in async persist mode, which one server only has: delete it and apply again)", have.Replicas, want.Replicas))
	}
	return settled(ctx, c, fixed, w.call("UPDATE", want.Name, func(ctx context.Context) error { _, err := js.UpdateStream(ctx, want); return err }))
}

func applyKeyValue(ctx context.Context, w *writer, want jetstream.KeyValueConfig) Change {
	js := w.js
	c := Change{Kind: KindKeyValue, Name: want.Bucket}
	s, err := streamInfo(ctx, js, KVStream(want.Bucket))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return created(ctx, c, w.call("CREATE", KVStream(want.Bucket), func(ctx context.Context) error { _, err := js.CreateKeyValue(ctx, want); return err }))
	}
	if err != nil {
		c.Action, c.Err = ActionFailed, err
		return c
	}
	var fixed []string
	c.Drift, fixed = streamDrift(s.CachedInfo().Config, kvStreamView(want), kvFields)
	return settled(ctx, c, fixed, w.call("UPDATE", KVStream(want.Bucket), func(ctx context.Context) error { _, err := js.UpdateKeyValue(ctx, want); return err }))
}

// streamInfo reads stream name's info, again while the cluster cannot
// answer yet (transientPlacement: its meta layer recovering or without a
// leader, the request timing out), as a create is: every stage applies the
// streams at start-up, and one whose first read fell in an election exited
// ("stream E2A_REQUESTS: context deadline exceeded", deploy's
// TestProductionDeployment).
func streamInfo(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := RetryPlacement(ctx, func(ctx context.Context) error {
		var err error
		s, err = js.Stream(ctx, name)
		return err
	})
	return s, err
}

// created is c once create (retried while the cluster refuses a
// placement) has made what did not exist: ActionCreated, or ActionFailed
// with the error.
func created(ctx context.Context, c Change, create func(context.Context) error) Change {
	c.Action = ActionCreated
	if err := RetryPlacement(ctx, create); err != nil {
		c.Action, c.Err = ActionFailed, err
	}
	return c
}

// settled is c (its Drift found) once settled: ActionFailed when a field
// that drifted cannot be updated in place (fixed), ActionUnchanged
// without drift, else ActionUpdated by update (retried while the cluster
// refuses a placement), or ActionFailed with its error.
func settled(ctx context.Context, c Change, fixed []string, update func(context.Context) error) Change {
	switch {
	case len(fixed) > 0:
		c.Action = ActionFailed
		c.Err = fmt.Errorf("%w: %s", ErrDriftNotUpdatable, strings.Join(fixed, "; "))
	case len(c.Drift) == 0:
		c.Action = ActionUnchanged
	default:
		c.Action = ActionUpdated
		if err := RetryPlacement(ctx, update); err != nil {
			c.Action, c.Err = ActionFailed, err
			if errors.Is(err, ErrNotPermitted) {
				// Said in the error too: a stage's start-up prints the
				// error only, not the Report.
				c.Err = fmt.Errorf("%w; it differs in %s", err, strings.Join(c.Drift, "; "))
			}
		}
	}
	return c
}

// KVStream is the name of the stream backing key-value bucket bucket
// (the JetStream convention, KV_<bucket>): for direct and leader reads of
// a bucket's entries.
func KVStream(bucket string) string { return "KV_" + bucket }

// kvStreamView returns the fields of the stream backing bucket kv that a
// KeyValueConfig controls, with the client library's defaults applied.
// Only these fields are compared (kvFields).
func kvStreamView(kv jetstream.KeyValueConfig) jetstream.StreamConfig {
	history := int64(kv.History)
	if history == 0 {
		history = 1
	}
	replicas := kv.Replicas
	if replicas == 0 {
		replicas = 1
	}
	maxBytes := kv.MaxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	maxMsgSize := kv.MaxValueSize
	if maxMsgSize == 0 {
		maxMsgSize = -1
	}
	comp := jetstream.NoCompression
	if kv.Compression {
		comp = jetstream.S2Compression
	}
	return jetstream.StreamConfig{
		Name:                   KVStream(kv.Bucket),
		Description:            kv.Description,
		MaxMsgsPerSubject:      history,
		MaxAge:                 kv.TTL,
		MaxBytes:               maxBytes,
		MaxMsgSize:             maxMsgSize,
		Storage:                kv.Storage,
		Replicas:               replicas,
		Compression:            comp,
		AllowMsgTTL:            kv.LimitMarkerTTL != 0,
		SubjectDeleteMarkerTTL: kv.LimitMarkerTTL,
		RePublish:              kv.RePublish,
		Metadata:               kv.Metadata,
	}
}

// kvFields are the stream fields a KeyValueConfig controls; the client
// library sets the others itself.
var kvFields = map[string]bool{
	"Description": true, "MaxMsgsPerSubject": true, "MaxAge": true, "MaxBytes": true,
	"MaxMsgSize": true, "Storage": true, "Replicas": true, "Compression": true,
	"AllowMsgTTL": true, "SubjectDeleteMarkerTTL": true, "RePublish": true, "Metadata": true,
}

// field compares one StreamConfig field.
type field struct {
	name string
	get  func(jetstream.StreamConfig) string
	// fixed reports whether the change have -> want is refused by the
	// server on update, or must not be made in place.
	fixed func(have, want jetstream.StreamConfig) bool
	// why, when set, explains a fixed change in the error Apply returns.
	why string
}

func str[T any](f func(jetstream.StreamConfig) T) func(jetstream.StreamConfig) string {
	return func(c jetstream.StreamConfig) string { return fmt.Sprint(f(c)) }
}

func dur(f func(jetstream.StreamConfig) time.Duration) func(jetstream.StreamConfig) string {
	return func(c jetstream.StreamConfig) string { return f(c).String() }
}

// removed reports a true -> false change of a flag the server only lets go
// one way.
func removed(f func(jetstream.StreamConfig) bool) func(have, want jetstream.StreamConfig) bool {
	return func(have, want jetstream.StreamConfig) bool { return f(have) && !f(want) }
}

var streamFields = []field{
	{name: "Description", get: str(func(c jetstream.StreamConfig) string { return fmt.Sprintf("%q", c.Description) })},
	{name: "Subjects", get: func(c jetstream.StreamConfig) string { return fmt.Sprint(slices.Sorted(slices.Values(c.Subjects))) }},
	{name: "Retention", get: str(func(c jetstream.StreamConfig) jetstream.RetentionPolicy { return c.Retention }),
		fixed: func(have, want jetstream.StreamConfig) bool {
			return have.Retention == jetstream.WorkQueuePolicy || want.Retention == jetstream.WorkQueuePolicy
		}},
	{name: "Storage", get: str(func(c jetstream.StreamConfig) jetstream.StorageType { return c.Storage }),
		fixed: func(have, want jetstream.StreamConfig) bool { return true }},
	{name: "Replicas", get: str(func(c jetstream.StreamConfig) int { return c.Replicas })},
	{name: "MaxConsumers", get: str(func(c jetstream.StreamConfig) int { return c.MaxConsumers })},
	{name: "MaxMsgs", get: str(func(c jetstream.StreamConfig) int64 { return c.MaxMsgs })},
	{name: "MaxBytes", get: str(func(c jetstream.StreamConfig) int64 { return c.MaxBytes })},
	{name: "MaxAge", get: dur(func(c jetstream.StreamConfig) time.Duration { return c.MaxAge })},
	{name: "MaxMsgsPerSubject", get: str(func(c jetstream.StreamConfig) int64 { return c.MaxMsgsPerSubject })},
	{name: "MaxMsgSize", get: str(func(c jetstream.StreamConfig) int32 { return c.MaxMsgSize })},
	{name: "Discard", get: str(func(c jetstream.StreamConfig) jetstream.DiscardPolicy { return c.Discard })},
	{name: "DiscardNewPerSubject", get: str(func(c jetstream.StreamConfig) bool { return c.DiscardNewPerSubject })},
	{name: "Duplicates", get: dur(func(c jetstream.StreamConfig) time.Duration { return c.Duplicates })},
	{name: "NoAck", get: str(func(c jetstream.StreamConfig) bool { return c.NoAck })},
	{name: "Sealed", get: str(func(c jetstream.StreamConfig) bool { return c.Sealed }),
		fixed: removed(func(c jetstream.StreamConfig) bool { return c.Sealed })},
	{name: "DenyDelete", get: str(func(c jetstream.StreamConfig) bool { return c.DenyDelete }),
		fixed: removed(func(c jetstream.StreamConfig) bool { return c.DenyDelete })},
	{name: "DenyPurge", get: str(func(c jetstream.StreamConfig) bool { return c.DenyPurge }),
		fixed: removed(func(c jetstream.StreamConfig) bool { return c.DenyPurge })},
	{name: "AllowRollup", get: str(func(c jetstream.StreamConfig) bool { return c.AllowRollup })},
	{name: "AllowDirect", get: str(func(c jetstream.StreamConfig) bool { return c.AllowDirect })},
	{name: "AllowBatchPublish", get: str(func(c jetstream.StreamConfig) bool { return c.AllowBatchPublish })},
	{name: "MirrorDirect", get: str(func(c jetstream.StreamConfig) bool { return c.MirrorDirect })},
	{name: "Compression", get: str(func(c jetstream.StreamConfig) jetstream.StoreCompression { return c.Compression })},
	{name: "AllowMsgTTL", get: str(func(c jetstream.StreamConfig) bool { return c.AllowMsgTTL }),
		fixed: removed(func(c jetstream.StreamConfig) bool { return c.AllowMsgTTL })},
	{name: "SubjectDeleteMarkerTTL", get: dur(func(c jetstream.StreamConfig) time.Duration { return c.SubjectDeleteMarkerTTL })},
	{name: "AllowMsgCounter", get: str(func(c jetstream.StreamConfig) bool { return c.AllowMsgCounter }),
		fixed: func(have, want jetstream.StreamConfig) bool { return true }},
	{name: "PersistMode", get: str(func(c jetstream.StreamConfig) jetstream.PersistModeType { return c.PersistMode }),
		fixed: func(have, want jetstream.StreamConfig) bool { return true }},
	{name: "RePublish", get: func(c jetstream.StreamConfig) string {
		if c.RePublish == nil {
			return "none"
		}
		return fmt.Sprintf("%s -> %s headers_only=%v", c.RePublish.Source, c.RePublish.Destination, c.RePublish.HeadersOnly)
	}},
	{name: "Sources", get: func(c jetstream.StreamConfig) string {
		var out []string
		for _, s := range c.Sources {
			if s == nil {
				continue
			}
			d := s.Name
			if s.OptStartSeq != 0 {
				d += fmt.Sprintf(" start_seq=%d", s.OptStartSeq)
			}
			if s.FilterSubject != "" {
				d += " filter=" + s.FilterSubject
			}
			for _, t := range s.SubjectTransforms {
				d += " " + t.Source + "=>" + t.Destination
			}
			out = append(out, d)
		}
		slices.Sort(out)
		return "[" + strings.Join(out, ", ") + "]"
	}, fixed: sourceRetargeted, why: "a source's subject transforms or filter cannot change in place: nats-server " +
		"keeps a source's progress under a name built from its stream, filter and transforms, so a changed source is a new " +
		"one that copies its stream again from its start sequence (1): E2A_AUDIT's partitions (Config.AuditPartitions) " +
		"cannot change in place, or the append-only audit would hold everything E2A_REQUESTS and E2A_RESPONSES hold twice. " +
		"Keep AuditPartitions, or delete E2A_AUDIT (losing the history the hot streams no longer hold) and apply again"},
	{name: "Metadata", get: func(c jetstream.StreamConfig) string {
		// The server adds its own _nats.* keys.
		var out []string
		for _, k := range slices.Sorted(maps.Keys(c.Metadata)) {
			if !strings.HasPrefix(k, "_nats.") {
				out = append(out, k+"="+c.Metadata[k])
			}
		}
		return "{" + strings.Join(out, ",") + "}"
	}},
}

// sourceRetargeted reports whether a source of want, by stream name, has a
// filter or subject transforms other than the same source of have.
// nats-server indexes a source's progress by a name built from its stream,
// filter and transforms (the "iname"): updating a source's filter or
// transforms drops that progress, and the changed source copies its stream
// again from OptStartSeq. Adding or removing a source, or changing only its
// start sequence, is left to the update.
func sourceRetargeted(have, want jetstream.StreamConfig) bool {
	target := func(s *jetstream.StreamSource) string {
		d := "filter=" + s.FilterSubject
		for _, t := range s.SubjectTransforms {
			d += " " + t.Source + "=>" + t.Destination
		}
		return d
	}
	old := map[string]string{}
	for _, s := range have.Sources {
		if s != nil {
			old[s.Name] = target(s)
		}
	}
	for _, s := range want.Sources {
		if s == nil {
			continue
		}
		if t, ok := old[s.Name]; ok && t != target(s) {
			return true
		}
	}
	return false
}

// streamDrift compares the fields a definition controls (all of
// streamFields, or those in only when it is not nil). It returns every
// difference as "Field: have -> want", and separately those the server
// refuses to update.
func streamDrift(have, want jetstream.StreamConfig, only map[string]bool) (drift, fixed []string) {
	for _, f := range streamFields {
		if only != nil && !only[f.name] {
			continue
		}
		h, w := f.get(have), f.get(want)
		if h == w {
			continue
		}
		d := f.name + ": " + h + " -> " + w
		drift = append(drift, d)
		if f.fixed != nil && f.fixed(have, want) {
			if f.why != "" {
				d += " (" + f.why + ")"
			}
			fixed = append(fixed, d)
		}
	}
	return drift, fixed
}

package streams_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestAuditSourceStartsAtFirst pins the cause of the loss TestFullStreams
// used to log: a source of E2A_AUDIT that has copied nothing yet, set up
// while E2A_AUDIT has already dropped its first messages at its byte limit,
// must start at its stream's first message. nats-server starts such a
// source at the time of E2A_AUDIT's last message unless the source names a
// start sequence, skipping every message of its stream older than that.
//
// The test makes the case deterministic: frames are written first, while
// E2A_AUDIT sources only E2A_REQUESTS; requests then fill E2A_AUDIT past
// its limit (newer than every frame); then streams.Apply adds the
// E2A_RESPONSES source, as an upgrade would. Every frame must be copied,
// and no request twice.
func TestAuditSourceStartsAtFirst(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	cfg.AuditMaxBytes = 64 << 10
	for _, sc := range []jetstream.StreamConfig{cfg.RequestsStreamConfig(), cfg.ResponsesStreamConfig()} {
		if _, err := js.CreateStream(ctx(t), sc); err != nil {
			t.Fatal(err)
		}
	}
	onlyRequests := cfg.AuditStreamConfig()
	// As deployed before the fix: one source, no start sequence.
	src := *onlyRequests.Sources[0]
	src.OptStartSeq = 0
	onlyRequests.Sources = []*jetstream.StreamSource{&src}
	audit, err := js.CreateStream(ctx(t), onlyRequests)
	if err != nil {
		t.Fatal(err)
	}

	const frames, requests = 50, 200
	for i := range frames {
		resp, _ := subjects.Response("early")
		m := nats.NewMsg(resp)
		m.Header.Set(subjects.HeaderRequestID, "early")
		m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID("early", int64(i)))
		m.Data = []byte(`{"seq":` + strconv.Itoa(i) + `}`)
		if _, err := js.PublishMsg(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	pad := []byte(strings.Repeat("x", 900))
	for i := range requests {
		id := "r" + strconv.Itoa(i)
		req, _ := subjects.Request("pool", id)
		m := nats.NewMsg(req)
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Header.Set(subjects.HeaderMsgID, id)
		m.Data = pad
		if _, err := js.PublishMsg(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT to copy every request", func() bool {
		info, err := audit.Info(ctx(t))
		return err == nil && info.State.LastSeq == requests
	})
	info, _ := audit.Info(ctx(t))
	if info.State.FirstSeq <= 1 {
		t.Fatalf("E2A_AUDIT not past its byte limit: first sequence %d, %d B", info.State.FirstSeq, info.State.Bytes)
	}

	if _, err := streams.Apply(ctx(t), js, cfg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT to copy every frame written before its source existed", func() bool {
		info, err := audit.Info(ctx(t))
		return err == nil && info.State.LastSeq == requests+frames
	})
	testkit.Eventually(t, 10*time.Second, "both sources caught up", func() bool {
		info, err := audit.Info(ctx(t))
		if err != nil || len(info.Sources) != 2 {
			return false
		}
		for _, si := range info.Sources {
			if si.Lag != 0 || si.Error != nil {
				return false
			}
		}
		return true
	})
	info, _ = audit.Info(ctx(t))
	if info.State.LastSeq != requests+frames {
		t.Errorf("E2A_AUDIT last sequence %d after the upgrade, want %d (a source copied twice)", info.State.LastSeq, requests+frames)
	}
	if info.State.Bytes > uint64(cfg.AuditMaxBytes) {
		t.Errorf("E2A_AUDIT holds %d B, limit %d", info.State.Bytes, cfg.AuditMaxBytes)
	}
}

// TestApplyRefusesAuditPartitionsChange: AuditPartitions is in the subject
// transforms of E2A_AUDIT's sources, and nats-server keys a source's
// progress by a name built from its transforms. Updating the sources in
// place would make each a new source that copies its whole stream again
// (OptStartSeq 1) into the append-only audit. Apply must refuse the change,
// leave E2A_AUDIT as it is, and the audit must go on holding each message
// once.
func TestApplyRefusesAuditPartitionsChange(t *testing.T) {
	_, _, js := startApplied(t)
	cfg := testConfig()
	const requests, frames = 5, 3
	for i := range requests {
		if _, err := js.Publish(ctx(t), "e2a.req.demo.r"+strconv.Itoa(i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range frames {
		resp, _ := subjects.Response("r0")
		m := nats.NewMsg(resp)
		m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID("r0", int64(i)))
		m.Data = []byte(`{}`)
		if _, err := js.PublishMsg(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	audit, err := js.Stream(ctx(t), streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	// caughtUp reports whether both sources have copied all there is and
	// E2A_AUDIT holds at least want messages.
	caughtUp := func(want uint64) bool {
		info, err := audit.Info(ctx(t))
		if err != nil || len(info.Sources) != 2 || info.State.Msgs < want {
			return false
		}
		for _, si := range info.Sources {
			if si.Lag != 0 || si.Error != nil {
				return false
			}
		}
		return true
	}
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT to copy every request and frame", func() bool { return caughtUp(requests + frames) })

	changed := cfg
	changed.AuditPartitions = 8
	rep, err := streams.Apply(ctx(t), js, changed)
	if !errors.Is(err, streams.ErrDriftNotUpdatable) {
		t.Fatalf("Apply with AuditPartitions 16 -> 8: err = %v\n%s", err, rep)
	}
	a, _ := rep.Get(streams.AuditStream)
	if a.Action != streams.ActionFailed || !errors.Is(a.Err, streams.ErrDriftNotUpdatable) ||
		!strings.Contains(strings.Join(a.Drift, ";"), "Sources: ") ||
		!strings.Contains(a.Err.Error(), "AuditPartitions") || !strings.Contains(a.Err.Error(), "cannot change in place") {
		t.Fatalf("audit: %+v", a)
	}
	for _, c := range rep.Changes {
		if c.Name != streams.AuditStream && c.Action != streams.ActionUnchanged {
			t.Errorf("%s: %+v", c.Name, c)
		}
	}
	info, err := audit.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info.Config.Sources[0].SubjectTransforms, cfg.AuditStreamConfig().Sources[0].SubjectTransforms) ||
		!reflect.DeepEqual(info.Config.Sources[1].SubjectTransforms, cfg.AuditStreamConfig().Sources[1].SubjectTransforms) {
		t.Fatalf("E2A_AUDIT's sources changed: %+v %+v", info.Config.Sources[0], info.Config.Sources[1])
	}

	// Nothing is copied twice: once both sources have caught up with one
	// more request, the audit holds each message once.
	if _, err := js.Publish(ctx(t), "e2a.req.demo.after", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	const want = requests + frames + 1
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT to copy the request published after the refused change", func() bool { return caughtUp(want) })
	if info, _ := audit.Info(ctx(t)); info.State.Msgs != want || info.State.LastSeq != want {
		t.Errorf("E2A_AUDIT holds %d messages (last sequence %d), want %d: a source copied its stream again", info.State.Msgs, info.State.LastSeq, want)
	}
	// The definition applied again is in place.
	if rep, err := streams.Apply(ctx(t), js, cfg); err != nil || rep.Changed() {
		t.Fatalf("Apply with the original partitions: %v\n%s", err, rep)
	}
}

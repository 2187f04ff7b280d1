package streams_test

import (
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

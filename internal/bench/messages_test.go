package bench

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// brokerWork is what one request of 8 frames costs the broker beyond its
// response messages: the messages the pipeline's connections send to the
// server and receive from it (client messages only: the server's own
// sourcing and republishing are not counted here) and the task index writes.
type brokerWork struct {
	in, out    int64
	taskWrites uint64
}

// wantBrokerWork is docs/benchmarks.md's table ("Broker work per request"), for m
// response messages per request (the 8 frames are stored as bursts: one
// message when the handler writes them all before the first is taken, 8
// when each waits for the previous PubAck). The E2A calls send the request,
// the m messages and the agent's ack (2+m), and get the request's PubAck,
// the m messages' PubAcks, the request's delivery to the agent and the m
// messages republished live to egress (2+2m). An A2A call that starts a
// task is the same: its first request stands for the task's record, which
// only a second turn writes (ingress/tasks.go). An ACP call adds the
// session index write and its PubAck; ACP reads the session record
// and the session's configuration too (two direct gets), and, its sessions
// being reused, each prompt names the session's previous one, whose last
// frame the agent reads before it runs the prompt (one direct get:
// agent/turns.go), as ACP's front door does at the prompt's first frame
// (one direct get: a previous turn interrupted with tool calls pending
// leaves them to this one, protocols/acp's leftPending). The E2A calls name their request_id (the client
// chose it): ingress first checks that no frames of it are stored (one
// direct get on E2A_RESPONSES: ingress.Server.checkFrames). An A2A stream
// reads the task's record once at its turn's end (one direct get on
// KV_E2A_TASKS, host.Tasks.LaterTurn: a later turn recorded meanwhile is
// followed, never a terminal state it would take back); a blocking send
// answered with a Message reads nothing. E2A_AUDIT copies the request
// and its m messages.
var wantBrokerWork = map[string]brokerWork{
	ProtoE2ASSE:          {3, 3, 0},
	ProtoE2ANDJSON:       {3, 3, 0},
	ProtoA2AStream:       {3, 3, 0},
	ProtoA2ASend:         {2, 2, 0},
	ProtoA2AV1Stream:     {3, 3, 0},
	ProtoA2AV1RESTStream: {3, 3, 0},
	ProtoACP:             {8, 8, 1},
}

// maxResponseMsgs bounds the response messages per request of 8 frames
// written at once, on average: the bursts must form (8 without them).
const maxResponseMsgs = 4

// TestBrokerWorkPerRequest counts, on the in-process pipeline, the client
// messages and the stored messages of each protocol's requests: a change
// that adds a round trip or a stored message per request fails here (and
// updates docs/benchmarks.md's table when it is worth it).
func TestBrokerWorkPerRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a pipeline")
	}
	for _, proto := range Protocols {
		if _, ok := wantBrokerWork[proto]; !ok {
			t.Errorf("protocol %s has no broker work in the table", proto)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pipe, err := StartPipeline(ctx, PipelineOptions{Frames: 8, FrameBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	srv := pipe.Embedded.Server()
	lastSeqs := func() map[string]uint64 {
		jsz, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, a := range jsz.AccountDetails {
			for _, s := range a.Streams {
				m[s.Name] = s.State.LastSeq
			}
		}
		return m
	}
	// acked reports whether the agent's consumer holds no request unacked:
	// an agent acks after the final frame, so a call can be answered before
	// its ack reaches the server (and is counted).
	acked := func() bool {
		jsz, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range jsz.AccountDetails {
			for _, s := range a.Streams {
				for _, c := range s.Consumer {
					if c.NumAckPending != 0 {
						return false
					}
				}
			}
		}
		return true
	}
	clientMsgs := func() (in, out int64) {
		v, err := srv.Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.InMsgs, v.OutMsgs
	}
	for _, proto := range Protocols {
		want := wantBrokerWork[proto]
		t.Run(proto, func(t *testing.T) {
			cl := &client{base: pipe.URL, proto: proto, hc: newHTTPClient(64), sessions: make(chan string, 64),
				params: map[string]any{"text": "bench", "frames": 8, "frame_bytes": 100, "delay_ms": 0}, expectFrames: 8}
			ids := &idGen{prefix: "work-" + proto}
			do := func(ctx context.Context, id string, start time.Time) result { return cl.do(ctx, id, start) }
			// Warm-up: connections, and ACP's sessions (session/new is not
			// part of a prompt's work).
			if w := closedLoop(ctx, "warmup", 50, 8, ids, do, false, false); w.Failed != 0 {
				t.Fatalf("warm-up: %+v", w.Errors)
			}
			settle(t, lastSeqs, acked)
			const n = 400
			in0, out0 := clientMsgs()
			seq0 := lastSeqs()
			// One request at a time, as the README's table counts them.
			if ph := closedLoop(ctx, "count", n, 1, ids, do, false, false); ph.OK != n {
				t.Fatalf("%d of %d ok: %v", ph.OK, n, ph.Errors)
			}
			seq1 := settle(t, lastSeqs, acked)
			in1, out1 := clientMsgs()
			msgs := seq1[streams.ResponsesStream] - seq0[streams.ResponsesStream]
			m := float64(msgs) / n
			t.Logf("%.4f in, %.4f out, %.4f response messages per request", float64(in1-in0)/n, float64(out1-out0)/n, m)
			if msgs < n || m > maxResponseMsgs {
				t.Errorf("%.4f response messages per request of 8 frames, want 1 to %d", m, maxResponseMsgs)
			}
			// Periodic traffic (pull requests, heartbeats) adds a little: up
			// to half a message per request. The counts are compared as
			// integers (a float sum of 2 and 2×1.0075 is not 4.015).
			const slack = n / 2
			if got, w := in1-in0, want.in*n+int64(msgs); got < w || got > w+slack {
				t.Errorf("%d client messages in for %d requests, want %d to %d", got, n, w, w+slack)
			}
			if got, w := out1-out0, want.out*n+2*int64(msgs); got < w || got > w+slack {
				t.Errorf("%d client messages out for %d requests, want %d to %d", got, n, w, w+slack)
			}
			wantStored := map[string]uint64{streams.RequestsStream: n, streams.ResponsesStream: msgs, streams.AuditStream: n + msgs}
			if want.taskWrites > 0 {
				wantStored["KV_"+streams.TasksBucket] = want.taskWrites * n
			}
			for name, s := range seq1 {
				if got := s - seq0[name]; got != wantStored[name] {
					t.Errorf("%s stored %d messages for %d requests, want %d", name, got, n, wantStored[name])
				}
			}
		})
	}
}

// settle waits until E2A_AUDIT has copied every request and frame (it
// sources them asynchronously; the other streams are complete once the
// calls are answered) and every request is acked, and returns the streams'
// last sequences.
func settle(t *testing.T, lastSeqs func() map[string]uint64, acked func() bool) map[string]uint64 {
	t.Helper()
	var cur map[string]uint64
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT caught up and every request acked", func() bool {
		cur = lastSeqs()
		return cur[streams.AuditStream] == cur[streams.RequestsStream]+cur[streams.ResponsesStream] && acked()
	})
	return cur
}

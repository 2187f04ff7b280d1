package push

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRewoundPositions: in E2A_RESPONSES gone back to sequence 5 keeping
// its creation time (restored from a backup in the format of servers
// before 2.15), the first message after the restore point stored at time
// 100, a position past 5 whose message was stored before 100 is one the
// stream lost: at the restore point, done (a cursor), or the restore
// point (a config's From). Positions up to 5, of the stream since (stored
// at 100 or later), without a time (written before positions had one), or
// of another stream stand.
func TestRewoundPositions(t *testing.T) {
	e := streamEpoch{at: 7, rewound: 5, resumed: 100}
	cases := []struct {
		name    string
		seq     uint64
		at      int64
		wantSeq uint64
	}{
		{"lost", 9, 90, 5},
		{"in the backup", 4, 50, 4},
		{"stored since", 9, 100, 9},
		{"no time", 9, 0, 9},
	}
	for _, c := range cases {
		cur, ok := cursor{Seq: c.seq, At: c.at, Stream: 7, Done: true, Final: true, Tail: 9}.inStream(e)
		if !ok || cur.Seq != c.wantSeq || !cur.Done || !cur.Final || cur.Stream != 7 {
			t.Errorf("%s: cursor at %d in the stream gone back: %+v", c.name, c.seq, cur)
		}
		if lost := c.wantSeq != c.seq; lost != (cur.Tail == 5) {
			t.Errorf("%s: tail %d", c.name, cur.Tail)
		}
		if from := (Config{From: c.seq, FromAt: c.at, Stream: 7}).fromIn(e); from != c.wantSeq {
			t.Errorf("%s: From %d in the stream gone back: %d", c.name, c.seq, from)
		}
	}
	if cur, _ := (cursor{Seq: 9, At: 90, Stream: 7, Event: 1}).inStream(e); !cur.Done || cur.Final || cur.Seq != 5 || cur.At != 0 {
		t.Errorf("a lost cursor within a message: %+v, want done at 5 (its time not known), not final", cur)
	}
	if from := (Config{From: 9, FromAt: 90, Stream: 3}).fromIn(e); from != 0 {
		t.Errorf("From of another stream: %d, want 0", from)
	}
	for _, c := range []struct {
		seq, mseq uint64
		at, mat   int64
		want      bool
	}{
		{9, 6, 90, 120, true},   // stored later, at a lower sequence
		{9, 9, 90, 120, true},   // another message at the position's sequence
		{9, 9, 90, 90, false},   // the position's message
		{9, 6, 90, 80, false},   // an earlier message
		{9, 10, 90, 120, false}, // a later message
		{9, 6, 0, 120, false},   // a position without a time
	} {
		if got := wentBack(c.seq, c.at, c.mseq, c.mat); got != c.want {
			t.Errorf("wentBack(%d at %d, message %d at %d) = %v", c.seq, c.at, c.mseq, c.mat, got)
		}
	}
}

// TestRewindConfirmedByThePositionsMessage: a message stored later at a
// sequence not after a position (wentBack) is also what a server's clock
// stepping back, or a new leader's clock behind the last one's, gives,
// with nothing restored. The stage reads the position's own message
// first: stored as the position saw it, the stream did not go back, and
// no restore point is noted (one noted would send every later position's
// updates again). Its message stored at another time is a rewind.
func TestRewindConfirmedByThePositionsMessage(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	for i := range 4 {
		if _, err := js.Publish(ctx, "e2a.resp.clock", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	own, err := streams.LeaderNextBySubject(ctx, nc, streams.ResponsesStream, ">", 3)
	if err != nil || own.Seq != 3 {
		t.Fatalf("message 3: %+v, %v", own, err)
	}
	at := own.Time.UnixNano()
	s := &stage{nc: nc, ctx: ctx, log: slog.New(slog.DiscardHandler)}
	e, err := s.noteRewind(ctx, 1, 3, at, 2, at+1000) // message 2 "stored after" message 3: a clock stepped back
	if err != nil {
		t.Fatal(err)
	}
	if e.resumed != 0 || s.restored.Load() != nil {
		t.Fatalf("a clock's step taken for a rewind: %+v", e)
	}
	e, err = s.noteRewind(ctx, 1, 3, at-1, 2, at+1000) // the position's message was another
	if err != nil {
		t.Fatal(err)
	}
	if e.resumed == 0 {
		t.Fatalf("a rewind not noted: %+v", e)
	}
}

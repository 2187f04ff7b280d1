package streams_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// fill publishes n frames spread round-robin over k requests and returns
// the stream sequences of the frames of each request.
func fill(t testing.TB, js jetstream.JetStream, n, k int) map[string][]uint64 {
	t.Helper()
	seqs := map[string][]uint64{}
	futs := make([]jetstream.PubAckFuture, 0, n)
	ids := make([]string, 0, n)
	for i := range n {
		id := "req-" + strconv.Itoa(i%k)
		subj, _ := subjects.Response(id)
		m := nats.NewMsg(subj)
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Header.Set(subjects.HeaderSequence, strconv.Itoa(i/k))
		m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID(id, int64(i/k)))
		m.Data = fmt.Appendf(nil, `{"seq":%d}`, i/k)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
		ids = append(ids, id)
		if len(futs)%1000 == 0 {
			waitAsync(t, js)
		}
	}
	waitAsync(t, js)
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			seqs[ids[i]] = append(seqs[ids[i]], ack.Sequence)
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	return seqs
}

func TestDirectGetBatch(t *testing.T) {
	_, nc, js := startApplied(t)
	seqs := fill(t, js, 1000, 37) // 27 or 28 frames per request
	id := "req-5"
	subj, _ := subjects.Response(id)
	want := seqs[id]

	// Page through one subject.
	var got []streams.RawMsg
	from := uint64(0)
	pages := 0
	for {
		page, more, err := streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, subj, from, 10)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, page...)
		if !more {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	if pages != 3 || len(got) != len(want) {
		t.Fatalf("%d pages, %d messages, want 3 pages, %d", pages, len(got), len(want))
	}
	for i, m := range got {
		if m.Seq != want[i] || m.Subject != subj || m.Header.Get(subjects.HeaderSequence) != strconv.Itoa(i) ||
			m.Header.Get(subjects.HeaderRequestID) != id || string(m.Data) != fmt.Sprintf(`{"seq":%d}`, i) || m.Time.IsZero() {
			t.Fatalf("message %d: %+v", i, m)
		}
		for _, h := range []string{subjects.HeaderStream, subjects.HeaderSubject, subjects.HeaderStreamSequence, subjects.HeaderNumPending, subjects.HeaderLastSequence, subjects.HeaderTimeStamp} {
			if _, ok := m.Header[h]; ok {
				t.Fatalf("direct get header %s kept", h)
			}
		}
	}

	// Resume from a sequence in the middle (the resume point of a reader
	// that has seen frames 0..9).
	page, more, err := streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, subj, want[9]+1, 100)
	if err != nil || more || len(page) != len(want)-10 || page[0].Seq != want[10] {
		t.Fatalf("resume: %d messages, more %v, %v", len(page), more, err)
	}
	// Exactly the last one.
	page, more, err = streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, subj, want[len(want)-1], 5)
	if err != nil || more || len(page) != 1 {
		t.Fatalf("last: %d, %v, %v", len(page), more, err)
	}
	// Past the end.
	if _, _, err := streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, subj, want[len(want)-1]+1, 5); !errors.Is(err, streams.ErrNoMessages) {
		t.Fatalf("past the end: %v", err)
	}
	// Unknown subject.
	unknown, _ := subjects.Response("nope")
	if _, _, err := streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, unknown, 0, 5); !errors.Is(err, streams.ErrNoMessages) {
		t.Fatalf("unknown subject: %v", err)
	}
	if _, err := streams.DirectGetAll(ctx(t), nc, streams.ResponsesStream, unknown, 0, 5); !errors.Is(err, streams.ErrNoMessages) {
		t.Fatalf("DirectGetAll unknown subject: %v", err)
	}
	// Wildcards work too.
	page, more, err = streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, subjects.AllResponses, 0, 50)
	if err != nil || !more || len(page) != 50 || page[49].Seq != 50 {
		t.Fatalf("wildcard: %d, %v, %v", len(page), more, err)
	}

	// DirectGetAll and DirectGetSeq.
	all, err := streams.DirectGetAll(ctx(t), nc, streams.ResponsesStream, subj, 0, 4)
	if err != nil || len(all) != len(want) {
		t.Fatalf("DirectGetAll: %d, %v", len(all), err)
	}
	n := 0
	for m, err := range streams.DirectGetSeq(ctx(t), nc, streams.ResponsesStream, subj, want[20], 3) {
		if err != nil || m.Seq != want[20+n] {
			t.Fatalf("DirectGetSeq %d: %+v %v", n, m, err)
		}
		n++
		if n == 5 {
			break
		}
	}

	// LastBySubject.
	last, err := streams.LastBySubject(ctx(t), nc, streams.ResponsesStream, subj)
	if err != nil || last.Seq != want[len(want)-1] || last.Header.Get(subjects.HeaderRequestID) != id {
		t.Fatalf("LastBySubject: %+v, %v", last, err)
	}
	_, err = streams.LastBySubject(ctx(t), nc, streams.ResponsesStream, unknown)
	if !errors.Is(err, streams.ErrNoMessages) || err.Error() != "streams: no messages: "+streams.ResponsesStream+" "+unknown {
		t.Fatalf("LastBySubject unknown: %v", err)
	}
}

func TestDirectGetErrors(t *testing.T) {
	_, nc, _ := startApplied(t)
	subj, _ := subjects.Response("x")
	if _, _, err := streams.DirectGetBatch(ctx(t), nc, "NO_SUCH_STREAM", subj, 0, 5); !errors.Is(err, streams.ErrDirectGet) {
		t.Fatalf("unknown stream: %v", err)
	}
	if _, err := streams.LastBySubject(ctx(t), nc, "NO_SUCH_STREAM", subj); !errors.Is(err, streams.ErrDirectGet) {
		t.Fatalf("LastBySubject unknown stream: %v", err)
	}
	for _, tc := range []struct {
		stream, subject string
		batch           int
	}{{"", subj, 1}, {"A.B", subj, 1}, {streams.ResponsesStream, "", 1}, {streams.ResponsesStream, subj, 0}, {streams.ResponsesStream, subj, streams.MaxDirectGetBatch + 1}} {
		if _, _, err := streams.DirectGetBatch(ctx(t), nc, tc.stream, tc.subject, 0, tc.batch); !errors.Is(err, streams.ErrInvalidOptions) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	// A cancelled context sends nothing (before, the request went out and
	// its reply raced the cancel: under load the reply won).
	sent, err := nc.SubscribeSync(subjects.DirectGet(streams.ResponsesStream))
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := streams.DirectGetBatch(c, nc, streams.ResponsesStream, subj, 0, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sent.Pending(); n != 0 {
		t.Fatalf("%d direct gets sent with a cancelled context", n)
	}
}

func TestDirectGetConcurrent(t *testing.T) {
	_, nc, js := startApplied(t)
	seqs := fill(t, js, 1000, 100) // 10 frames per request
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				id := "req-" + strconv.Itoa((w*31+i)%100)
				subj, _ := subjects.Response(id)
				all, err := streams.DirectGetAll(ctx(t), nc, streams.ResponsesStream, subj, 0, 4)
				if err != nil {
					errs <- err
					return
				}
				if len(all) != 10 {
					errs <- fmt.Errorf("%s: %d messages", id, len(all))
					return
				}
				for j, m := range all {
					if m.Seq != seqs[id][j] {
						errs <- fmt.Errorf("%s: message %d seq %d, want %d", id, j, m.Seq, seqs[id][j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

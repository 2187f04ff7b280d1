package deploy

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestNATSClusterIngressReadsRequests: the ingress user of
// deploy/nats/accounts.conf reads E2A_REQUESTS on its own connection, the
// way package ingress does: a task's first turn (ingress/tasks.go
// firstTurn: a direct get of e2a.req.*.<id>, then the stream leader's
// message get when a replica does not have it yet), the first turns of a
// task list (ingress/firstturns.go: batched direct gets over e2a.req.>),
// a request just published (awaitStored: a direct get) and its envelope
// (loadEnvelope: the jetstream client's GetLastMsgForSubject, a direct
// get on a stream that allows them), and whether a client-chosen request
// id is already stored. A denied request goes unanswered (the server
// drops it and reports a permissions violation), so each read is bounded
// by a short deadline.
func TestNATSClusterIngressReadsRequests(t *testing.T) {
	c, ctx, _, _ := provisionedCluster(t, 60*time.Second, nil)

	inNC, sink := c.connect("ingress")
	inJS, err := jetstream.New(inNC)
	if err != nil {
		t.Fatal(err)
	}
	const id = "task-1"
	subj, _ := subjects.Request("demo", id)
	anyPool, _ := subjects.RequestAnyPool(id)
	data := `{"request_id":"` + id + `"}`
	// As ingress publishes a request whose id the client chose: only if no
	// pool holds the id yet.
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, anyPool)
	ack, err := inJS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatalf("ingress publish: %v", err)
	}

	// read runs one read as ingress, bounded: a denied one times out. Every
	// read here must succeed, so the bound costs time only on a failure:
	// 10 s, as a leader get on a loaded 3-server cluster just formed took
	// over 2 s once in CI.
	read := func(what string, get func(ctx context.Context) (streams.RawMsg, error)) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		got, err := get(rctx)
		if err != nil {
			t.Errorf("ingress %s: %v", what, err)
			return
		}
		if got.Subject != subj || got.Seq != ack.Sequence || string(got.Data) != data {
			t.Errorf("ingress %s: %s #%d %q, want %s #%d %q", what, got.Subject, got.Seq, got.Data, subj, ack.Sequence, data)
		}
	}
	read("direct get of a request by id in any pool (firstTurn, a chosen id's check)", func(ctx context.Context) (streams.RawMsg, error) {
		return streams.LastBySubject(ctx, inNC, streams.RequestsStream, anyPool)
	})
	read("direct get of a request just published (awaitStored)", func(ctx context.Context) (streams.RawMsg, error) {
		return streams.LastBySubject(ctx, inNC, streams.RequestsStream, subj)
	})
	read("leader get (firstTurn's confirmation)", func(ctx context.Context) (streams.RawMsg, error) {
		return streams.LeaderLastBySubject(ctx, inNC, streams.RequestsStream, anyPool)
	})
	read("batched direct get (ListTasks' first turns)", func(ctx context.Context) (streams.RawMsg, error) {
		for m, err := range streams.DirectGetSeq(ctx, inNC, streams.RequestsStream, subjects.AllRequests, 1, 16) {
			return m, err
		}
		return streams.RawMsg{}, streams.ErrNoMessages
	})
	read("envelope (loadEnvelope)", func(ctx context.Context) (streams.RawMsg, error) {
		st, err := inJS.Stream(ctx, streams.RequestsStream)
		if err != nil {
			return streams.RawMsg{}, err
		}
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return streams.RawMsg{}, err
		}
		return streams.RawMsg{Subject: m.Subject, Seq: m.Sequence, Data: m.Data}, nil
	})

	// A second request with the same chosen id, in another pool, is
	// refused by the server as it stores.
	other, _ := subjects.Request("other", id)
	m = nats.NewMsg(other)
	m.Data = []byte(data)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, anyPool)
	if _, err := inJS.PublishMsg(ctx, m); err == nil {
		t.Errorf("a second request %s in another pool was stored", id)
	}

	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, err := range sink.errs {
		t.Errorf("ingress connection error: %v", err)
	}
}

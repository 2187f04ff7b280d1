package egress

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// An id taken again once its first request left the hot streams (ingress
// refuses that only while they hold it): the History holds both requests,
// and the envelope it finds is the first in the id's window, another
// principal's (internal/audit's Auditor.Request). Once the newcomer's
// frames age out while its envelope stays hot, its owner's reads were
// answered from the History's copy without a look at whose it is: u_001
// read u-2's envelope and answer. The copy is answered only to a
// principal its own envelope's owner allows; the owner of the hot
// envelope gets the 410 of frames aged out that no History holds.
func TestHistoryCopyOfAnotherOwnerIsNotServed(t *testing.T) {
	for _, drop := range dropFrames {
		t.Run(drop.name, func(t *testing.T) {
			fh := newFakeHistory()
			e, srv := historyHTTP(t, fh, WithWaitLimits(5*time.Second, 5*time.Second))
			id := historicRequest(t, e) // u_001's, hot
			ackPending(t, e, 1)
			fh.reqs[id] = othersHistoric(t, id, "u-2", "u-2's secret")
			drop.drop(t, e) // u_001's envelope stays
			for _, c := range expiredReads {
				a := read(t, srv.URL+"/v1/requests/"+id+c.Path, "owner", c.Hdr...)
				if strings.Contains(a.Body, "u-2") {
					t.Fatalf("%s: u_001 read u-2's request from the History: %+v", c.Name, a)
				}
				checkExpired(t, c.Name, a, id)
			}
		})
	}
}

// othersHistoric is the History's copy of an earlier request of id, owner's,
// answered with text.
func othersHistoric(t *testing.T, id, owner, text string) HistoricRequest {
	t.Helper()
	env := newEnvelope(id)
	env.UserID = owner
	env.Params = map[string]any{"content": text}
	envRaw, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{env: env, clock: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	chunk := w.frame(e2a.KindChunk, false, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text})
	w.seq++
	final := w.frame(e2a.KindComplete, true, e2a.StatusSucceeded, e2a.CompleteBody{Result: text})
	h := HistoricRequest{Envelope: envRaw}
	for i, f := range []*e2a.Response{chunk, final} {
		raw, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		h.Frames = append(h.Frames, HistoricFrame{Raw: raw, StreamSeq: uint64(i + 1)})
	}
	return h
}

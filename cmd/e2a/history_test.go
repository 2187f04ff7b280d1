package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestDevReadAPIFromHistory: `e2a dev` wires the audit history into the
// read API (E2A_HISTORY, on by default): a request the hot streams dropped
// (purged, as their max age would) is answered by GET /v1/requests/{id}
// from E2A_AUDIT exactly as before; with E2A_HISTORY=false it is 404.
func TestDevReadAPIFromHistory(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want int
	}{{nil, http.StatusOK}, {[]string{"E2A_HISTORY=false"}, http.StatusNotFound}} {
		t.Run(strings.Join(append([]string{"default"}, c.env...), " "), func(t *testing.T) {
			// The demo pool may not have pulled yet when the banner shows.
			dev := startDev(t, append([]string{"E2A_LOG_FORMAT=json", "E2A_ACCEPT_UNKNOWN_POOLS=true"}, c.env...))
			base := dev.base
			nc, err := nats.Connect(dev.nats)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/requests?wait=true", strings.NewReader(`{"params":{"text":"history"}}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var view egress.RequestView
			err = json.NewDecoder(resp.Body).Decode(&view)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || view.State != egress.StateSucceeded {
				t.Fatalf("POST: %d %+v (%v)", resp.StatusCode, view, err)
			}
			if _, ok := egress.RequestIDTime(view.RequestID); !ok {
				t.Fatalf("request id %q is no UUIDv7", view.RequestID)
			}
			code, hot := httpGet(t, base+"/v1/requests/"+view.RequestID)
			if code != http.StatusOK {
				t.Fatalf("GET from the hot streams: %d %s", code, hot)
			}
			js := natstest.JetStream(t, nc)
			msgs := func(name string) uint64 {
				st, err := js.Stream(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				return st.CachedInfo().State.Msgs
			}
			hotMsgs := natstest.AuditedMsgs(t, js)
			testkit.Eventually(t, 15*time.Second, "E2A_AUDIT copied the hot streams", func() bool {
				return msgs(streams.AuditStream) >= hotMsgs
			})
			natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
			code, body := httpGet(t, base+"/v1/requests/"+view.RequestID)
			if code != c.want || c.want == http.StatusOK && body != hot {
				t.Errorf("GET once the hot streams dropped it: %d %s, want %d (from the hot streams: %s)", code, body, c.want, hot)
			}
		})
	}
}

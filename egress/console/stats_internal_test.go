package console

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStatsReading pins what statsSource.get computes from a registry's
// metrics, in JSON as GET /console/api/stats answers: each stage's totals,
// errors (by code or outcome label), rates over the window between two
// readings, in flight; a reading within minInterval is the cached one.
// The clock is synctest's, so the window is exactly 2 s. No JetStream: the
// consumers and streams are empty and no stage has a lag (the API test
// reads them from a real server).
func TestStatsReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		ingress := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mIngressRequests, Help: "h"}, []string{"code"})
		handled := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mAgentHandled, Help: "h"}, []string{"outcome"})
		agentFrames := prometheus.NewCounter(prometheus.CounterOpts{Name: mAgentFrames, Help: "h"})
		inFlight := prometheus.NewGauge(prometheus.GaugeOpts{Name: mAgentInFlight, Help: "h"})
		open := prometheus.NewGauge(prometheus.GaugeOpts{Name: mEgressOpen, Help: "h"})
		served := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mEgressStreams, Help: "h"}, []string{"outcome"})
		egressFrames := prometheus.NewCounter(prometheus.CounterOpts{Name: mEgressFrames, Help: "h"})
		indexed := prometheus.NewCounter(prometheus.CounterOpts{Name: mConsoleIndexed, Help: "h"})
		reg.MustRegister(ingress, handled, agentFrames, inFlight, open, served, egressFrames, indexed)
		add := func(k float64) {
			ingress.WithLabelValues("200").Add(10 * k)
			ingress.WithLabelValues("202").Add(5 * k)
			ingress.WithLabelValues("429").Add(2 * k)
			ingress.WithLabelValues("500").Add(k)
			handled.WithLabelValues("ok").Add(12 * k)
			handled.WithLabelValues("failed").Add(k)
			handled.WithLabelValues("deadline").Add(k)
			agentFrames.Add(96 * k)
			served.WithLabelValues("ok").Add(14 * k)
			served.WithLabelValues("slow_client").Add(k)
			egressFrames.Add(110 * k)
			indexed.Add(40 * k)
		}
		s := &statsSource{gatherer: reg, index: true, minInterval: 500 * time.Millisecond}
		ctx := context.Background()
		read := func() (*Stats, string) {
			st, err := s.get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			return st, string(b)
		}
		add(1)
		inFlight.Set(3)
		first, got := read()
		const want1 = `{"time":"2000-01-01T00:00:00Z","window_seconds":0,"stages":[{"stage":"ingress","total":18,"rate":null,"in_flight":null,"lag":null,"errors":3,"error_rate":null,"help":"HTTP requests answered by ingress; errors: answers with status ≥ 400"},{"stage":"agent","total":14,"rate":null,"in_flight":3,"lag":null,"errors":2,"error_rate":null,"help":"request deliveries handled by agent workers in this process; lag: requests not yet delivered to the agent-\u003cpool\u003e consumers"},{"stage":"egress","total":15,"rate":null,"in_flight":0,"lag":null,"errors":1,"error_rate":null,"help":"responses served by egress; errors: ended by error, timeout or slow client"},{"stage":"index","total":40,"rate":null,"in_flight":null,"lag":null,"errors":null,"error_rate":null,"help":"messages indexed by the console; lag: messages waiting for the index consumers"}],"consumers":[],"streams":null}`
		if got != want1 {
			t.Errorf("first reading:\n got %s\nwant %s", got, want1)
		}
		time.Sleep(100 * time.Millisecond)
		if again, _ := read(); again != first {
			t.Error("a reading within minInterval is not the cached one")
		}
		time.Sleep(1900 * time.Millisecond)
		add(2)
		inFlight.Set(1)
		open.Set(4)
		_, got = read()
		const want2 = `{"time":"2000-01-01T00:00:02Z","window_seconds":2,"stages":[{"stage":"ingress","total":54,"rate":18,"in_flight":null,"lag":null,"errors":9,"error_rate":3,"help":"HTTP requests answered by ingress; errors: answers with status ≥ 400"},{"stage":"agent","total":42,"rate":14,"in_flight":1,"lag":null,"errors":6,"error_rate":2,"frame_rate":96,"help":"request deliveries handled by agent workers in this process; lag: requests not yet delivered to the agent-\u003cpool\u003e consumers"},{"stage":"egress","total":45,"rate":15,"in_flight":4,"lag":null,"errors":3,"error_rate":1,"frame_rate":110,"help":"responses served by egress; errors: ended by error, timeout or slow client"},{"stage":"index","total":120,"rate":40,"in_flight":null,"lag":null,"errors":null,"error_rate":null,"help":"messages indexed by the console; lag: messages waiting for the index consumers"}],"consumers":[],"streams":null}`
		if got != want2 {
			t.Errorf("second reading:\n got %s\nwant %s", got, want2)
		}
	})
}

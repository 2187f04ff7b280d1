package console

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Stats is what GET /console/api/stats answers: per-stage counters of this
// process (from its metrics registry) and the state of the streams and
// their consumers (shared by every process).
type Stats struct {
	Time time.Time `json:"time"`
	// Window is the time over which the rates were computed (seconds; 0
	// on the first sample).
	Window    float64         `json:"window_seconds"`
	Stages    []StageStats    `json:"stages"`
	Consumers []ConsumerStats `json:"consumers"`
	Streams   []StreamStats   `json:"streams"`
}

// StageStats are the counters of one stage. Nil fields are not measured
// by this process (the stage does not run here, or has no such metric).
type StageStats struct {
	Stage string `json:"stage"`
	// Total of the stage's unit of work (requests answered, handled,
	// streams served, messages indexed) since the process started.
	Total *float64 `json:"total"`
	// Rate of Total per second over the window.
	Rate *float64 `json:"rate"`
	// InFlight is the work in progress now.
	InFlight *float64 `json:"in_flight"`
	// Lag is the number of messages waiting for the stage's consumers.
	Lag *float64 `json:"lag"`
	// Errors is the total of failed outcomes, ErrorRate their rate.
	Errors    *float64 `json:"errors"`
	ErrorRate *float64 `json:"error_rate"`
	// Frames per second the stage publishes or writes (agent, egress).
	FrameRate *float64 `json:"frame_rate,omitempty"`
	// Help says what the numbers count.
	Help string `json:"help"`
}

// ConsumerStats is the state of one consumer of the E2A streams.
type ConsumerStats struct {
	Stream      string `json:"stream"`
	Name        string `json:"name"`
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	Waiting     int    `json:"waiting"`
	// Pool is the agent pool of an agent-<pool> consumer; NoLiveWorker is
	// set when no worker of it is pulling (requests for it wait).
	Pool         string `json:"pool,omitempty"`
	NoLiveWorker bool   `json:"no_live_worker,omitempty"`
	// Upstream names a bridge pool's upstream ("openai http://host:8000"),
	// as its bridge published it (bridge.PoolInfo; no credential); a
	// built-in pool names its kind alone ("builtin").
	Upstream string `json:"upstream,omitempty"`
}

// StreamStats is the size of one stream.
type StreamStats struct {
	Name      string `json:"name"`
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	Consumers int    `json:"consumers"`
}

// counter names read from the registry: e2a_<stage>_<what>_<unit>.
const (
	mIngressRequests = "e2a_ingress_requests_total"
	mAgentInFlight   = "e2a_agent_in_flight"
	mAgentHandled    = "e2a_agent_requests_handled_total"
	mAgentFrames     = "e2a_agent_frames_published_total"
	mEgressOpen      = "e2a_egress_streams_open"
	mEgressStreams   = "e2a_egress_streams_total"
	mEgressFrames    = "e2a_egress_frames_written_total"
	mConsoleIndexed  = "e2a_console_indexed_messages_total"
	mConsoleErrors   = "e2a_console_index_errors_total"
)

// agentErrorOutcomes are the outcomes of e2a_agent_requests_handled_total
// that mean a request failed.
var agentErrorOutcomes = []string{"failed", "panic", "deadline", "interrupted", "max_deliveries", "invalid", "lost"}

// egressErrorOutcomes are the outcomes of e2a_egress_streams_total that
// mean a response was not served to its end.
var egressErrorOutcomes = []string{"error", "timeout", "slow_client"}

// sample is one reading of the counters rates are computed from.
type sample struct {
	t      time.Time
	values map[string]float64
}

// statsSource computes Stats, at most once per minInterval whatever the
// number of pages polling.
type statsSource struct {
	gatherer prometheus.Gatherer
	js       jetstream.JetStream
	index    bool
	presence *streams.Presence // which pools have a live worker

	mu          sync.Mutex
	samples     []*sample // recent readings, oldest first
	last        *Stats
	minInterval time.Duration
}

// get computes Stats, or returns the last ones when they are younger than
// minInterval.
func (s *statsSource) get(ctx context.Context) (*Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.last != nil && now.Sub(s.last.Time) < s.minInterval {
		return s.last, nil
	}
	fams, err := s.gather()
	if err != nil {
		return nil, err
	}
	st := &Stats{Time: now.UTC()}
	st.Consumers, st.Streams = s.streamState(ctx)
	r := &reading{now: now, fams: fams, cur: &sample{t: now, values: map[string]float64{}},
		base: s.rateBase(now), consumers: st.Consumers}
	if r.base != nil {
		st.Window = now.Sub(r.base.t).Seconds()
	}
	st.Stages = []StageStats{r.ingress(), r.agent(), r.egress()}
	if s.index {
		st.Stages = append(st.Stages, r.index())
	}
	s.samples = append(s.samples, r.cur)
	for len(s.samples) > 1 && now.Sub(s.samples[0].t) > 10*time.Second {
		s.samples = s.samples[1:]
	}
	s.last = st
	return st, nil
}

// gather reads the metric families of the registry, by name (none without
// a gatherer).
func (s *statsSource) gather() (map[string]*dto.MetricFamily, error) {
	fams := map[string]*dto.MetricFamily{}
	if s.gatherer == nil {
		return fams, nil
	}
	mfs, err := s.gatherer.Gather()
	if err != nil && len(mfs) == 0 {
		return nil, err
	}
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return fams, nil
}

// rateBase is the sample the rates are taken from: the newest reading at
// least a second old (else the oldest one), so that a page polling often
// still gets stable rates; nil on the first reading.
func (s *statsSource) rateBase(now time.Time) *sample {
	for i := len(s.samples) - 1; i >= 0; i-- {
		if now.Sub(s.samples[i].t) >= time.Second {
			return s.samples[i]
		}
	}
	if len(s.samples) > 0 {
		return s.samples[0]
	}
	return nil
}

// reading is one computation of the stages' counters: the gathered metric
// families, the sample it adds (counters under their own keys) and the
// one its rates are taken from, and the consumers the lags are summed over.
type reading struct {
	now       time.Time
	fams      map[string]*dto.MetricFamily
	cur, base *sample
	consumers []ConsumerStats
}

// sum adds up the values of metric name whose labels keep accepts (every
// one when keep is nil); nil when the registry has no such metric.
func (r *reading) sum(name string, keep func(labels map[string]string) bool) *float64 {
	mf, ok := r.fams[name]
	if !ok {
		return nil
	}
	var t float64
	for _, m := range mf.GetMetric() {
		if keep != nil {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if !keep(labels) {
				continue
			}
		}
		switch {
		case m.Counter != nil:
			t += m.GetCounter().GetValue()
		case m.Gauge != nil:
			t += m.GetGauge().GetValue()
		case m.Untyped != nil:
			t += m.GetUntyped().GetValue()
		}
	}
	return &t
}

// put keeps v in the sample under key and returns it.
func (r *reading) put(key string, v *float64) *float64 {
	if v != nil {
		r.cur.values[key] = *v
	}
	return v
}

// rate is the per-second change of key since the base sample; nil when
// either sample lacks it.
func (r *reading) rate(key string) *float64 {
	v, ok := r.cur.values[key]
	if !ok || r.base == nil {
		return nil
	}
	p, ok := r.base.values[key]
	dt := r.now.Sub(r.base.t).Seconds()
	if !ok || dt <= 0 {
		return nil
	}
	rt := math.Max(0, (v-p)/dt)
	return &rt
}

// lag sums the pending messages of the consumers keep accepts; nil when
// it accepts none.
func (r *reading) lag(keep func(c ConsumerStats) bool) *float64 {
	var n float64
	found := false
	for _, c := range r.consumers {
		if keep(c) {
			n += float64(c.Pending)
			found = true
		}
	}
	if !found {
		return nil
	}
	return &n
}

func (r *reading) ingress() StageStats {
	in := StageStats{Stage: "ingress", Help: "HTTP requests answered by ingress; errors: answers with status ≥ 400"}
	in.Total = r.put("in.total", r.sum(mIngressRequests, nil))
	in.Errors = r.put("in.err", r.sum(mIngressRequests, func(l map[string]string) bool {
		c, _ := strconv.Atoi(l["code"])
		return c >= 400
	}))
	in.Rate, in.ErrorRate = r.rate("in.total"), r.rate("in.err")
	return in
}

func (r *reading) agent() StageStats {
	ag := StageStats{Stage: "agent", Help: "request deliveries handled by agent workers in this process; lag: requests not yet delivered to the agent-<pool> consumers"}
	r.outcomes(&ag, "ag", mAgentHandled, agentErrorOutcomes, mAgentFrames, mAgentInFlight)
	ag.Lag = r.lag(func(c ConsumerStats) bool {
		return c.Stream == streams.RequestsStream && strings.HasPrefix(c.Name, "agent-")
	})
	return ag
}

func (r *reading) egress() StageStats {
	eg := StageStats{Stage: "egress", Help: "responses served by egress; errors: ended by error, timeout or slow client"}
	r.outcomes(&eg, "eg", mEgressStreams, egressErrorOutcomes, mEgressFrames, mEgressOpen)
	return eg
}

// outcomes sets st's total and errors from the counter total (by its
// outcome label: errs are the failed ones), their rates and the frame rate
// from the counter frames, under sample keys prefixed with key, and what
// is in flight from the gauge inFlight.
func (r *reading) outcomes(st *StageStats, key, total string, errs []string, frames, inFlight string) {
	st.Total = r.put(key+".total", r.sum(total, nil))
	st.Errors = r.put(key+".err", r.sum(total, func(l map[string]string) bool { return slices.Contains(errs, l["outcome"]) }))
	r.put(key+".frames", r.sum(frames, nil))
	st.Rate, st.ErrorRate, st.FrameRate = r.rate(key+".total"), r.rate(key+".err"), r.rate(key+".frames")
	st.InFlight = r.sum(inFlight, nil)
}

func (r *reading) index() StageStats {
	ix := StageStats{Stage: "index", Help: "messages indexed by the console; lag: messages waiting for the index consumers"}
	ix.Total = r.put("ix.total", r.sum(mConsoleIndexed, nil))
	ix.Errors = r.put("ix.err", r.sum(mConsoleErrors, nil))
	ix.Rate, ix.ErrorRate = r.rate("ix.total"), r.rate("ix.err")
	ix.Lag = r.lag(func(c ConsumerStats) bool { return c.Name == RequestsConsumer })
	return ix
}

// live tells whether pool has a live worker (streams.Presence: a single
// reading between a worker's pulls would say none).
func (s *statsSource) live(pool string, ci *jetstream.ConsumerInfo) bool {
	if s.presence == nil {
		return ci.NumWaiting > 0
	}
	return s.presence.Live(pool, ci)
}

// streamState reads the consumers and sizes of the request and response
// streams (a failure leaves them out: the counters still show).
func (s *statsSource) streamState(ctx context.Context) ([]ConsumerStats, []StreamStats) {
	consumers := []ConsumerStats{}
	var sts []StreamStats
	if s.js == nil {
		return consumers, sts
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream} {
		str, err := s.js.Stream(ctx, name)
		if err != nil {
			continue
		}
		info := str.CachedInfo()
		sts = append(sts, StreamStats{Name: name, Messages: info.State.Msgs, Bytes: info.State.Bytes, Consumers: info.State.Consumers})
		lister := str.ListConsumers(ctx)
		for ci := range lister.Info() {
			cs := ConsumerStats{Stream: name, Name: ci.Name, Pending: ci.NumPending,
				AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting}
			if pool, ok := strings.CutPrefix(ci.Name, "agent-"); ok && name == streams.RequestsStream {
				cs.Pool, cs.NoLiveWorker = pool, !s.live(pool, ci)
				if info, found, err := bridge.LookupPool(ctx, s.js, pool); err == nil && found {
					// A built-in pool (tck-basic) names no address.
					cs.Upstream = strings.TrimSpace(info.Kind + " " + info.Upstream)
				}
			}
			consumers = append(consumers, cs)
		}
	}
	slices.SortFunc(consumers, func(a, b ConsumerStats) int {
		return strings.Compare(a.Stream+"/"+a.Name, b.Stream+"/"+b.Name)
	})
	return consumers, sts
}

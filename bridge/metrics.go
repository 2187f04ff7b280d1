package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// metrics are the bridge's metrics, labelled by pool and upstream.
type metrics struct {
	calls    *prometheus.CounterVec
	retries  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	tokens   *prometheus.CounterVec
}

// maxModels bounds the models a pool's token series name: the model label
// is the upstream's word, which could be anything.
const maxModels = 32

// maxModelLen bounds a model label (a longer name is cut).
const maxModelLen = 128

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	s := obs.NewMetricSet(r, obs.Shared) // the bridges of a process share the series
	m := &metrics{
		calls: s.CounterVec("e2a_bridge_calls_total",
			"Upstream calls by pool, upstream and outcome (ok, agent_failed: the upstream answered with its own failure, an upstream_* error code, cancelled; the cancel of a cancel turn or of a request cancelled at its takeover: cancel_ and its outcome).",
			"pool", "upstream", "outcome"),
		retries:  s.CounterVec("e2a_bridge_retries_total", "Upstream calls retried before any frame was written.", "pool", "upstream"),
		duration: s.HistogramVec("e2a_bridge_call_duration_seconds", "Upstream call latency, retries included.", latencyBuckets, "pool", "upstream"),
		ttft: s.HistogramVec("e2a_bridge_first_frame_seconds", "Time from the start of an upstream call to its first frame (TTFT).",
			latencyBuckets, "pool", "upstream"),
		inFlight: s.GaugeVec("e2a_bridge_in_flight", "Upstream calls in flight in this process.", "pool", "upstream"),
		tokens: s.CounterVec("e2a_bridge_tokens_total",
			"Tokens the upstream reported using in a request's final result (its usage, as OpenAI's chat completions report it; "+
				"a failed request counts none), by pool, upstream, model (the upstream's own name for it; past the first "+
				strconv.Itoa(maxModels)+" models of a pool in this process, \"other\") and kind: "+
				"prompt, completion, and when reported cached_prompt (part of prompt) and reasoning (part of completion).",
			"pool", "upstream", "model", "kind"),
	}
	return m, s.Err()
}

// modelLabels are the model labels of a pool's token series: the first
// maxModels models seen, any other "other".
type modelLabels struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// label is model's label: valid UTF-8 (a label value that is not makes
// the client library panic), at most maxModelLen bytes, "unknown" when the
// result names none, "other" past the cap.
func (l *modelLabels) label(model string) string {
	model = strings.ToValidUTF8(model, "\uFFFD")
	if len(model) > maxModelLen {
		model = strings.ToValidUTF8(model[:maxModelLen], "")
	}
	if model == "" {
		return "unknown"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[model]; ok {
		return model
	}
	if len(l.seen) >= maxModels {
		return "other"
	}
	if l.seen == nil {
		l.seen = map[string]struct{}{}
	}
	l.seen[model] = struct{}{}
	return model
}

// tokenKinds are the kinds of e2a_bridge_tokens_total and where a usage
// object holds their counts (in is the member holding name, "" the usage
// itself).
var tokenKinds = [...]struct{ kind, in, name string }{
	{"prompt", "", "prompt_tokens"},
	{"completion", "", "completion_tokens"},
	{"cached_prompt", "prompt_tokens_details", "cached_tokens"},
	{"reasoning", "completion_tokens_details", "reasoning_tokens"},
}

// UsageReporter is a final result that tells the model and the token usage
// it reports itself (the OpenAI bridge's result, a struct): its usage is
// counted without encoding it.
type UsageReporter interface {
	ReportedUsage() (model string, usage json.RawMessage)
}

// reportedUsage is the model and the usage object a final result reports
// (the members "model" and "usage" of a result that is an object: a
// UsageReporter, a bridge's map, or an agent's JSON answer), usage nil
// when it reports none.
func reportedUsage(result any) (model string, usage []byte) {
	switch r := result.(type) {
	case UsageReporter:
		return r.ReportedUsage()
	case map[string]any:
		u, ok := r["usage"]
		if !ok || u == nil {
			return "", nil
		}
		model, _ = r["model"].(string)
		switch v := u.(type) {
		case json.RawMessage:
			return model, v
		case []byte:
			return model, v
		}
		b, err := json.Marshal(u)
		if err != nil {
			return "", nil
		}
		return model, b
	case json.RawMessage:
		return rawUsage(r)
	case []byte:
		return rawUsage(r)
	}
	return "", nil
}

// rawUsage is reportedUsage of a result written as JSON.
func rawUsage(b []byte) (model string, usage []byte) {
	if !bytes.Contains(b, []byte(`"usage"`)) {
		return "", nil // an answer without usage, not decoded
	}
	var r struct {
		Model json.RawMessage `json:"model"`
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(b, &r) != nil {
		return "", nil
	}
	_ = json.Unmarshal(r.Model, &model) // a model that is no string: none
	return model, r.Usage
}

// completeResult is the result of the body of a final e2a.complete frame
// an upstream wrote whole (an HTTP agent's own frame), nil when it has
// none or reports no usage.
func completeResult(body any) any {
	switch b := body.(type) {
	case e2a.CompleteBody:
		return b.Result
	case *e2a.CompleteBody:
		if b != nil {
			return b.Result
		}
	case json.RawMessage:
		return rawResult(b)
	case []byte:
		return rawResult(b)
	}
	return nil
}

// rawResult is the result of an e2a.complete body written as JSON, nil
// when it reports no usage.
func rawResult(body []byte) any {
	if !bytes.Contains(body, []byte(`"usage"`)) {
		return nil
	}
	var cb struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(body, &cb) != nil || len(cb.Result) == 0 {
		return nil
	}
	return cb.Result
}

// countTokens adds the usage a final result of pool's upstream reports to
// its token series: each kind whose count is a non-negative integer (any
// other is not counted), the model labelled by models.
func (m *metrics) countTokens(models *modelLabels, pool, upstream string, result any, scrub func(string) string) {
	model, usage := reportedUsage(result)
	if len(usage) == 0 {
		return
	}
	label := ""
	for _, k := range tokenKinds {
		obj := usage
		if k.in != "" {
			if obj, _ = member(usage, k.in); obj == nil {
				// No such object (an upstream that reports no details):
				// nothing in it to read, and no failed decoding of
				// nothing (6 allocations).
				continue
			}
		}
		raw, ok := member(obj, k.name)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			continue
		}
		if label == "" {
			if scrub != nil {
				model = scrub(model)
			}
			label = models.label(model)
		}
		m.tokens.WithLabelValues(pool, upstream, label, k.kind).Add(float64(n))
	}
}

// member is the raw value of the member key of the JSON object obj as
// json.Unmarshal into a map[string]json.RawMessage reads it (the last one
// of a repeated key; nil when there is none or obj is null), false when
// obj is no object (nor null). The scan allocates nothing; an object it
// cannot read exactly so (a key written with escapes) and anything that
// is no valid object go to encoding/json. (Decoding the usage into maps
// was the bridge's largest allocation per request.)
func member(obj []byte, key string) ([]byte, bool) {
	var val []byte
	if jsonstr.ValidMembers(obj, func(k, v []byte) bool {
		if string(k) == key {
			val = v
		}
		return true
	}) {
		return val, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil, false
	}
	return m[key], true
}

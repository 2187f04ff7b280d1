package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ruleGroups is a Prometheus rules file (rule_files) and the spec of a
// PrometheusRule (monitoring.coreos.com/v1): the fields this project uses,
// decoded strictly.
type ruleGroups struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []rule `json:"rules"`
	} `json:"groups"`
}

// rule is one rule of a group.
type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// prometheusRule is the PrometheusRule of deploy/k8s.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       ruleGroups        `json:"spec"`
}

// kubeletMetrics are the kubelet's volume statistics (Kubernetes metrics
// reference, kubelet /metrics: kubelet_volume_stats_*), scraped by the
// Prometheus Operator's kubelet ServiceMonitor.
var kubeletMetrics = map[string][]string{
	"kubelet_volume_stats_used_bytes":     {"namespace", "persistentvolumeclaim"},
	"kubelet_volume_stats_capacity_bytes": {"namespace", "persistentvolumeclaim"},
}

// requiredAlerts are what issue 14 asks the rules to cover.
var requiredAlerts = []string{
	"E2AConsumerLag", "E2ARedeliveries", "E2AConsumerRedelivered", "E2ARequestsAbandoned", "E2AIngress5xx",
	"E2AIngressBackpressure", "E2AStreamNearByteLimit", "E2AJetStreamStoreFilling", "E2ANATSVolumeFilling",
	"E2ANATSServerMissing", "E2AJetStreamMetaLeaderMissing", "E2AStreamLeaderMissing", "E2AAuditRetentionShort",
	"E2ASlowClientDisconnects",
	// Issue 40: the push stage's lag and its dead-letter stream.
	"E2APushLag", "E2APushDeliveryLag", "E2APushDeadLettered", "E2APushSkipped", "E2APushDeadStreamFilling",
	// The archiver: history lost, the archive behind, the archive's own
	// retention.
	"E2AArchiveMissed", "E2AArchiveBehind", "E2AArchiveRetentionShort",
	// A stalled archiver (failing without archiving), and a corrupt batch
	// it wrote past.
	"E2AArchiveStalled", "E2AArchiveCorruptBatch",
	// Ingress's failed-credential limiter: an address guessing
	// credentials, and the limiter at its address bound.
	"E2AIngressAuthThrottled", "E2AIngressAuthLimitEvicting",
	// The stages' NATS connections: a user refused (accounts.conf not
	// matching the version), subscriptions dropping messages.
	"E2ANATSPermissionDenied", "E2ANATSSlowConsumer",
	// JetStream unavailable to the processes (no quorum): their /readyz
	// degraded, e2a_jetstream_unavailable 1.
	"E2AJetStreamUnavailable",
}

// loadRules reads deploy/prometheus/rules.yaml and checks that the
// PrometheusRule of deploy/k8s carries the same groups.
func loadRules(t *testing.T) ruleGroups {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleGroups
	strict(t, "prometheus/rules.yaml", data, &rules)
	data, err = os.ReadFile(filepath.Join("k8s", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	strict(t, "k8s/prometheusrule.yaml", data, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Namespace != "e2a" {
		t.Errorf("k8s/prometheusrule.yaml: %s %s in %q", pr.APIVersion, pr.Kind, pr.Metadata.Namespace)
	}
	if !reflect.DeepEqual(pr.Spec, rules) {
		t.Errorf("k8s/prometheusrule.yaml and prometheus/rules.yaml differ")
	}
	return rules
}

// ruleMetrics parses every expression and returns, per metric it names,
// the labels the rules match or group it by.
func ruleMetrics(t *testing.T, rules ruleGroups) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(metric string, labels ...string) {
		// A histogram's buckets are its metric, their le label its own.
		if base, ok := strings.CutSuffix(metric, "_bucket"); ok && strings.HasPrefix(metric, "e2a_") {
			metric = base
			labels = slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return l == "le" })
		}
		for _, l := range labels {
			if !slices.Contains(out[metric], l) {
				out[metric] = append(out[metric], l)
			}
		}
		if _, ok := out[metric]; !ok {
			out[metric] = nil
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			e, err := parsePromQL(r.Expr)
			if err != nil {
				t.Errorf("%s: %v\n%s", r.Alert, err, r.Expr)
				continue
			}
			if e.Type != tInstant {
				t.Errorf("%s: the expression is a %v, an alert needs an instant vector", r.Alert, e.Type)
			}
			for _, s := range e.Selectors {
				add(s.Metric, s.Labels...)
			}
			for _, gr := range e.Grouping {
				for _, m := range gr.Metrics {
					add(m, gr.Labels...)
				}
			}
		}
	}
	return out
}

// TestAlertRules checks deploy/prometheus/rules.yaml and the
// PrometheusRule: strict decoding, every expression parsed and
// type-checked, durations, severities, annotation templates, every
// required alert present, every metric known with the labels used (e2a_*
// as the stages register them; nats_* as the exporter names them;
// kubelet_* as the kubelet does), and the audit retention target equal to
// E2A_AUDIT_MAX_AGE. TestProductionDeployment checks the e2a_* metrics
// against the real processes' /metrics too.
func TestAlertRules(t *testing.T) {
	rules := loadRules(t)
	var names []string
	tmplData := struct {
		Labels map[string]string
		Value  float64
	}{map[string]string{"pool": "demo", "stream_name": "E2A_AUDIT"}, 0.93}
	funcs := template.FuncMap{
		"humanize":           func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) },
		"humanizePercentage": func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
		"humanizeDuration":   func(v float64) string { return time.Duration(v * float64(time.Second)).String() },
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.Alert == "" || r.Record != "" {
				t.Errorf("group %s: rule %q is not an alert", g.Name, r.Expr)
			}
			if r.For != "" && !regexp.MustCompile(`^`+promDuration.String()[1:]+`$`).MatchString(r.For) {
				t.Errorf("%s: for %q is not a duration", r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: summary and description required", r.Alert)
			}
			for k, a := range r.Annotations {
				// Prometheus defines $labels and $value before the text.
				tm, err := template.New(k).Funcs(funcs).Parse("{{$labels := .Labels}}{{$value := .Value}}" + a)
				if err == nil {
					err = tm.Execute(&bytes.Buffer{}, tmplData)
				}
				if err != nil {
					t.Errorf("%s: annotation %s: %v", r.Alert, k, err)
				}
			}
		}
	}
	for _, want := range requiredAlerts {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s", want)
		}
	}

	registered := registeredMetrics(t)
	for metric, labels := range ruleMetrics(t, rules) {
		var known []string
		switch {
		case strings.HasPrefix(metric, "e2a_"):
			l, ok := registered[metric]
			if !ok {
				t.Errorf("%s is not registered by any stage", metric)
				continue
			}
			known = l
		case strings.HasPrefix(metric, "nats_"):
			if !exporterMetrics[metric] {
				t.Errorf("%s is not a metric of the NATS exporter", metric)
				continue
			}
			known = exporterLabels(metric)
		case kubeletMetrics[metric] != nil:
			known = kubeletMetrics[metric]
		default:
			t.Errorf("%s: unknown metric", metric)
			continue
		}
		for _, l := range labels {
			if !slices.Contains(known, l) {
				t.Errorf("%s has no label %q (labels %v)", metric, l, known)
			}
		}
	}

	// The retention targets are E2A_AUDIT_MAX_AGE (the archiver's
	// buffer) and E2A_ARCHIVE_MAX_AGE (the history).
	for alert, key := range map[string]string{"E2AAuditRetentionShort": "E2A_AUDIT_MAX_AGE", "E2AArchiveRetentionShort": "E2A_ARCHIVE_MAX_AGE"} {
		age, err := time.ParseDuration(configMapEnv(t)[key])
		if err != nil {
			t.Fatalf("%s in k8s/config.yaml: %v", key, err)
		}
		if r := ruleNamed(rules, alert); !strings.Contains(r.Expr, "< "+strconv.FormatInt(int64(age.Seconds()), 10)+" ") {
			t.Errorf("%s does not compare with %s %v = %d s: %s", alert, key, age, int64(age.Seconds()), r.Expr)
		}
	}
	checkRetentionAlerts(t, rules)
	checkArchiveAlerts(t, rules)
	checkAuthLimitAlerts(t, rules)
	checkNATSConnAlerts(t, rules)
	checkJetStreamUnavailableAlert(t, rules)
	checkRunbooks(t, rules)
}

// ruleNamed returns the alert called name (zero when there is none).
func ruleNamed(rules ruleGroups, name string) rule {
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r
			}
		}
	}
	return rule{}
}

// checkRetentionAlerts: E2AAuditRetentionShort and
// E2AArchiveRetentionShort say the stream keeps less than its max age
// because its max bytes are reached first, so they fire only while the
// stream sits at its byte limit (DiscardOld keeps it within one message of
// it). Their estimate of the history held (messages ÷ the last hour's
// arrival rate) alone also fired for a stream kept by its age: one holding
// its 72 h of messages reads as holding 72 h × (the 72-hour average ÷ the
// last hour's rate), under 72 h in every hour busier than the average, so
// both alerts fired every day at the daily peak of any deployment whose
// traffic is not flat, once the stream had aged out its first messages.
func checkRetentionAlerts(t *testing.T, rules ruleGroups) {
	t.Helper()
	for alert, stream := range map[string]string{"E2AAuditRetentionShort": "E2A_AUDIT", "E2AArchiveRetentionShort": "E2A_ARCHIVE"} {
		sel := `{stream_name="` + stream + `",is_stream_leader="true"}`
		checkAlertSpecs(t, rules, alertSpec{alert, "warning", "1h", []string{
			"and max(nats_stream_first_seq" + sel + ") > 1",
			"and max(nats_stream_total_bytes" + sel + ") / max(nats_stream_limit_bytes" + sel + " > 0) > 0.99"},
			[]string{stream + "_MAX_BYTES", stream + "_MAX_AGE"}})
	}
}

// checkArchiveAlerts checks what the archiver's alerts say: history lost
// (any message E2A_AUDIT dropped unarchived, at once, critical), and the
// archive behind (its newest message more than 15 min old, or no archiver
// reporting, while E2A_AUDIT receives), the archiver stalled (failing
// without progress: e2a_archive_stalled_seconds, which it sets past its
// stall delay), and a corrupt last batch it wrote past (counted, said at
// once, also by a process whose counter starts at 1).
func checkArchiveAlerts(t *testing.T, rules ruleGroups) {
	t.Helper()
	for _, c := range []struct {
		alert, severity string
		parts           []string
	}{
		{"E2AArchiveMissed", "critical", []string{"increase(e2a_archive_missed_total[15m])", "> 0"}},
		{"E2AArchiveBehind", "warning", []string{"time() - max(e2a_archive_last_record_timestamp_seconds)", "> 900",
			"absent(e2a_archive_last_record_timestamp_seconds)", `rate(nats_stream_last_seq{stream_name="E2A_AUDIT",is_stream_leader="true"}[15m])`}},
		{"E2AArchiveStalled", "warning", []string{"max(e2a_archive_stalled_seconds)", "> 0"}},
		{"E2AArchiveCorruptBatch", "warning", []string{"increase(e2a_archive_corrupt_batches_total[1h])", "> 0",
			"e2a_archive_corrupt_batches_total unless e2a_archive_corrupt_batches_total offset 1h"}},
	} {
		r := ruleNamed(rules, c.alert)
		if r.Labels["severity"] != c.severity {
			t.Errorf("%s: severity %q, want %s", c.alert, r.Labels["severity"], c.severity)
		}
		for _, p := range c.parts {
			if !strings.Contains(r.Expr, p) {
				t.Errorf("%s: %q lacks %q", c.alert, r.Expr, p)
			}
		}
	}
	// History lost is said at once, not after a while.
	if r := ruleNamed(rules, "E2AArchiveMissed"); r.For != "" {
		t.Errorf("E2AArchiveMissed waits %s", r.For)
	}
}

// alertSpec is what an alert must say: its severity, its for (""
// none), parts of its expression, and words its description names.
type alertSpec struct {
	alert, severity, forDur string
	parts, says             []string
}

// checkAlertSpecs checks each alert of specs against rules.
func checkAlertSpecs(t *testing.T, rules ruleGroups, specs ...alertSpec) {
	t.Helper()
	for _, c := range specs {
		r := ruleNamed(rules, c.alert)
		if r.Labels["severity"] != c.severity || r.For != c.forDur {
			t.Errorf("%s: severity %q for %q, want %s for %q", c.alert, r.Labels["severity"], r.For, c.severity, c.forDur)
		}
		for _, p := range c.parts {
			if !strings.Contains(r.Expr, p) {
				t.Errorf("%s: %q lacks %q", c.alert, r.Expr, p)
			}
		}
		for _, w := range c.says {
			if !strings.Contains(r.Annotations["description"], w) {
				t.Errorf("%s: the description does not name %s", c.alert, w)
			}
		}
	}
}

// checkAuthLimitAlerts checks what the failure limiter's alerts say
// (ingress/AUTH.md, "Failed authentications"): credentials refused
// unchecked for 10 min on end (an address keeps guessing: a throttled
// client is refused every 429 it is sent, so a mistyping person stops
// long before), and any address evicted at the bound
// (E2A_AUTH_FAILURE_ADDRESSES), said at once since each eviction may let
// a guesser back early; both warnings, both pointing at the runbook and
// the settings an operator changes.
func checkAuthLimitAlerts(t *testing.T, rules ruleGroups) {
	t.Helper()
	checkAlertSpecs(t, rules,
		alertSpec{"E2AIngressAuthThrottled", "warning", "10m", []string{"sum(rate(e2a_ingress_auth_throttled_total[5m]))", "> 0"},
			[]string{"E2A_AUTH_FAILURE_LIMIT", "E2A_TRUSTED_PROXIES", "ingress/AUTH.md"}},
		alertSpec{"E2AIngressAuthLimitEvicting", "warning", "", []string{"sum(increase(e2a_ingress_auth_limit_evicted_total[15m]))", "> 0"},
			[]string{"E2A_AUTH_FAILURE_ADDRESSES", "ingress/AUTH.md"}})
}

// checkNATSConnAlerts checks the alerts on the stages' NATS connection
// events (streams.ConnEvents): a refused publish or subscription is
// critical at once (something the stage does is not done: accounts.conf
// does not match the version), subscriptions dropping messages a warning
// after 10 min (the stages read what they missed from the streams); both
// name where the log says more and the runbook.
func checkNATSConnAlerts(t *testing.T, rules ruleGroups) {
	t.Helper()
	checkAlertSpecs(t, rules,
		alertSpec{"E2ANATSPermissionDenied", "critical", "", []string{`e2a_nats_connection_events_total{event="permission_denied"}`, "> 0"},
			[]string{"accounts.conf", "NATS permissions violation", "docs/operations.md"}},
		alertSpec{"E2ANATSSlowConsumer", "warning", "10m", []string{`e2a_nats_connection_events_total{event="slow_consumer"}`, "> 0"},
			[]string{"NATS subscription too slow", "docs/operations.md"}})
}

// checkJetStreamUnavailableAlert checks the alert on
// e2a_jetstream_unavailable (internal/obs: 1 while a process's /readyz
// answers "degraded", JetStream answering no quorum or nothing while its
// NATS connection is up): the processes stay in their Services by design
// and refuse every request with a retryable error, so no probe failure
// says it; critical, after 2 min (a leader election after a server's
// loss takes seconds: docs/operations.md, Failure modes), naming what the
// gauge is, the probe that sets it and the runbook.
func checkJetStreamUnavailableAlert(t *testing.T, rules ruleGroups) {
	t.Helper()
	checkAlertSpecs(t, rules,
		alertSpec{"E2AJetStreamUnavailable", "critical", "2m", []string{"e2a_jetstream_unavailable", "> 0"},
			[]string{"/readyz", "degraded", "readiness probe", `Runbook: docs/operations.md, "JetStream unavailable"`}})
}

// checkRunbooks checks that every runbook an alert's description names in
// docs/operations.md (Runbook: docs/operations.md, "<section>") is a
// section of it.
func checkRunbooks(t *testing.T, rules ruleGroups) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`Runbook: docs/operations\.md, "([^"]+)"`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range ref.FindAllStringSubmatch(r.Annotations["description"], -1) {
				if !regexp.MustCompile(`(?m)^#{2,4} ` + regexp.QuoteMeta(m[1]) + `$`).Match(data) {
					t.Errorf("%s: its runbook %q is no section of docs/operations.md", r.Alert, m[1])
				}
			}
		}
	}
}

// TestPromQLParserRefuses makes sure the expression checks above do catch
// broken expressions.
func TestPromQLParserRefuses(t *testing.T) {
	for _, bad := range []string{
		`rate(x)`,                        // rate needs a range
		`sum(rate(x[5m])`,                // unbalanced
		`x{a="b"`,                        // unclosed matcher
		`x{a=b}`,                         // unquoted value
		`sum by (a (x)`,                  // broken grouping
		`1 > 2`,                          // scalar comparison without bool
		`x[5m] > 1`,                      // range vector operand
		`rat(x[5m])`,                     // unknown function
		`x and 1`,                        // set operator with a scalar
		`x{a=~"("}`,                      // bad regexp
		`histogram_quantile(x, 0.9)`,     // argument types swapped
		`sum(x) by (a) by (b)`,           // two groupings
		`max by (a) (x) / max by (a) (y`, // unbalanced
		`absent(x[5m])`,                  // absent takes an instant vector
		`(time() - max(x) > 900 or absent(y)) and z[15m] > 0`, // range vector operand
	} {
		if _, err := parsePromQL(bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
	e, err := parsePromQL(`sum by (pool) (rate(e2a_x_total{outcome=~"a|b"}[5m])) / on (pool) group_left max(y offset 1h) > 0.5 or vector(0)`)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Selectors) != 2 || e.Selectors[0].Metric != "e2a_x_total" || !slices.Equal(e.Selectors[0].Labels, []string{"outcome"}) || len(e.Grouping) != 1 {
		t.Errorf("parsed %+v", e)
	}
}

// checkAlertMetrics checks that every e2a_* metric the alerting rules name
// is in the real scrapes of the running processes (process name → the text
// of its /metrics), with the labels the rules use. A vector no process
// observed during the run has no series in a scrape (slow-client
// disconnects, in a run without slow clients): it must then be registered
// by an in-process pipeline with those labels (registeredMetrics), and is
// logged.
func checkAlertMetrics(t *testing.T, scrapes map[string]string) {
	t.Helper()
	seen := map[string]map[string]bool{} // metric → labels
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for _, text := range scrapes {
		for _, line := range strings.Split(text, "\n") {
			m := sample.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name := m[1]
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				name = strings.TrimSuffix(name, suf)
			}
			if seen[name] == nil {
				seen[name] = map[string]bool{}
			}
			for _, l := range label.FindAllStringSubmatch(m[2], -1) {
				seen[name][l[1]] = true
			}
		}
	}
	for metric, labels := range ruleMetrics(t, loadRules(t)) {
		if !strings.HasPrefix(metric, "e2a_") {
			continue
		}
		got, ok := seen[metric]
		if !ok {
			registered, ok := registeredMetrics(t)[metric]
			if !ok {
				t.Errorf("alert metric %s is in no scrape of the running processes, nor registered by any stage", metric)
				continue
			}
			got = map[string]bool{}
			for _, l := range registered {
				got[l] = true
			}
			t.Logf("alert metric %s: no series in this run's scrapes (never observed); registered with labels %v", metric, registered)
		}
		for _, l := range labels {
			if !got[l] {
				t.Errorf("alert metric %s has no label %q in the scrapes", metric, l)
			}
		}
	}
}

package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/e2a-pipeline/pipeline/redact"
)

// NewRegistry returns the process's one registry, with Go runtime and
// process collectors registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewLogger returns a slog logger writing to w in format "json" or "text" at
// level "debug", "info", "warn" or "error". Secrets are redacted by the
// policy of package redact (see [RedactAttr]); in JSON, a duration is written
// as Go writes it ("1m30s"), as the text format and the E2A_* settings do.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("obs: log level %q: %w", level, err)
	}
	ho := &slog.HandlerOptions{Level: lv, ReplaceAttr: RedactAttr}
	switch format {
	case "json", "":
		ho.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			a = RedactAttr(groups, a)
			if a.Value.Kind() == slog.KindDuration {
				// As the text format and the E2A_* settings write it
				// ("24h0m0s"), not slog's JSON integer of nanoseconds.
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("obs: log format %q is not json or text", format)
}

// RedactAttr is the ReplaceAttr of the process's logger (slog calls it for
// every attribute, those in groups included, after resolving LogValuers):
//
//   - an attribute whose key is secret (redact.IsSecretKey), or that is in
//     a group whose name is, is written as redact.Marker, unless its value
//     is a boolean or null or its key is a reference (credential_ref);
//   - a structured value (map, slice, struct, json.RawMessage, http.Header)
//     is redacted as its JSON form would be, at every depth: when it holds
//     a secret the attribute is written as a redacted copy (a JSON value),
//     otherwise it is left as is; the caller's value is never modified;
//   - a string or an error holding "Bearer <credential>" or "Basic
//     <credential>" has the credential replaced, whatever the key (an
//     error is then written as its redacted text).
func RedactAttr(groups []string, a slog.Attr) slog.Attr {
	if secretKey(groups, a.Key) {
		switch a.Value.Kind() {
		case slog.KindBool, slog.KindGroup:
		case slog.KindAny:
			if a.Value.Any() != nil {
				return slog.String(a.Key, redact.Marker)
			}
		default:
			return slog.String(a.Key, redact.Marker)
		}
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); strings.Contains(s, " ") {
			if r, ok := redactAuthScheme(s); ok {
				return slog.String(a.Key, r)
			}
		}
	case slog.KindAny:
		if e, ok := a.Value.Any().(error); ok && e != nil {
			// Written as its text: an upstream's answer or a wrapped
			// HTTP error may echo an Authorization header in it.
			if r, ok := redactAuthScheme(e.Error()); ok {
				return slog.String(a.Key, r)
			}
			return a
		}
		if v, ok := redactAny(a.Value.Any()); ok {
			return slog.Any(a.Key, v)
		}
	}
	return a
}

// secretKey reports whether an attribute's key, or one of its groups,
// names a secret, the key not being a reference.
func secretKey(groups []string, key string) bool {
	if redact.IsReferenceKey(key) {
		return false
	}
	if redact.IsSecretKey(key) {
		return true
	}
	for _, g := range groups {
		if redact.IsSecretKey(g) {
			return true
		}
	}
	return false
}

// redactAny returns a redacted copy of a structured value and true when it
// held a secret.
func redactAny(v any) (any, bool) {
	var data []byte
	switch t := v.(type) {
	case nil, error, fmt.Stringer, string, []byte:
		return nil, false
	case json.RawMessage:
		data = t
	default:
		switch reflect.ValueOf(v).Kind() {
		case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct, reflect.Pointer:
		default:
			return nil, false
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		data = b
	}
	if len(data) == 0 || (data[0] != '{' && data[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return nil, false
	}
	n := redact.Redact(x, nil)
	if h, ok := x.(map[string]any); ok {
		n += redactHeaderLists(h)
	}
	if n == 0 {
		return nil, false
	}
	return x, true
}

// redactHeaderLists redacts the values of header-like maps of lists
// (http.Header, url.Values) whose names are secret: Redact already did, as
// their JSON form is {"Authorization": ["…"]}; this catches the credential
// schemes in the values of the others.
func redactHeaderLists(m map[string]any) int {
	n := 0
	for _, v := range m {
		l, ok := v.([]any)
		if !ok {
			continue
		}
		for i, e := range l {
			if s, ok := e.(string); ok {
				if r, ok := redactAuthScheme(s); ok {
					l[i] = r
					n++
				}
			}
		}
	}
	return n
}

// redactAuthScheme replaces the credential after "Bearer " or "Basic " in s.
func redactAuthScheme(s string) (string, bool) {
	changed := false
	for _, scheme := range []string{"Bearer ", "Basic ", "bearer ", "basic "} {
		for off := 0; ; {
			i := strings.Index(s[off:], scheme)
			if i < 0 {
				break
			}
			start := off + i + len(scheme)
			end := start
			for end < len(s) && s[end] != ' ' && s[end] != '"' && s[end] != ',' && s[end] != '\n' {
				end++
			}
			if end > start && s[start:end] != redact.Marker {
				s = s[:start] + redact.Marker + s[end:]
				changed = true
				end = start + len(redact.Marker)
			}
			off = end
		}
	}
	return s, changed
}

// Check is one readiness check; it returns nil when ready.
type Check func(ctx context.Context) error

// NATSConnected is ready while nc is connected.
func NATSConnected(nc *nats.Conn) Check {
	return func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats: %s", nc.Status())
		}
		return nil
	}
}

// Register mounts GET /metrics (reg), GET /healthz (the process is alive)
// and GET /readyz (every check passes within 2 s) on mux.
func Register(mux *http.ServeMux, reg *prometheus.Registry, checks ...Check) {
	RegisterWithDetails(mux, reg, nil, checks...)
}

// Detail is an informational part of the /readyz answer: it never makes
// the process unready (e.g. which agent pools have a live worker).
type Detail struct {
	Name string
	Get  func(ctx context.Context) (any, error)
}

// RegisterWithDetails is Register with details added to every /readyz
// answer under "details" (an error of one is shown as its text). A check
// failing [Degraded] (JetStream unavailable: no quorum, no answer) leaves
// /readyz 200, its status "degraded" and the failures listed under
// "degraded", and e2a_jetstream_unavailable 1 in reg until an answer is
// no longer degraded; any other failure makes it 503, "unavailable".
func RegisterWithDetails(mux *http.ServeMux, reg *prometheus.Registry, details []Detail, checks ...Check) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	unavailable := jetStreamUnavailableGauge(reg)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var failures, degraded []string
		for _, c := range checks {
			if err := c(ctx); Degraded(err) {
				degraded = append(degraded, err.Error())
			} else if err != nil {
				failures = append(failures, err.Error())
			}
		}
		body := map[string]any{"status": "ready"}
		if len(details) > 0 {
			d := map[string]any{}
			for _, x := range details {
				v, err := x.Get(ctx)
				if err != nil {
					v = "unknown: " + err.Error()
				}
				d[x.Name] = v
			}
			body["details"] = d
		}
		w.Header().Set("Content-Type", "application/json")
		if len(degraded) > 0 {
			body["degraded"] = degraded
		}
		switch {
		case len(failures) > 0:
			body["status"], body["failures"] = "unavailable", failures
			unavailable.Set(0)
			w.WriteHeader(http.StatusServiceUnavailable)
		case len(degraded) > 0:
			body["status"] = "degraded"
			unavailable.Set(1)
		default:
			unavailable.Set(0)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}

// jetStreamUnavailableGauge is reg's e2a_jetstream_unavailable, registered
// by the first /readyz mounted on reg and shared by any other.
func jetStreamUnavailableGauge(reg *prometheus.Registry) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "e2a_jetstream_unavailable",
		Help: "1 while the process's /readyz answers degraded: JetStream cannot answer (no quorum, no answer in time) while its NATS connection is up; it stays ready, its front doors refusing with retryable errors."})
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(prometheus.Gauge); ok {
				return existing
			}
		}
		panic(err)
	}
	return g
}

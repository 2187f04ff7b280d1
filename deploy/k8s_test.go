package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/e2a-pipeline/pipeline/agent"
)

// scaledObject is KEDA's ScaledObject (keda.sh/v1alpha1), the fields of
// its CRD this project may use; decoding is strict, so a misspelt or
// unknown field fails.
type scaledObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Fallback              *struct {
			FailureThreshold int32  `json:"failureThreshold"`
			Replicas         int32  `json:"replicas"`
			Behavior         string `json:"behavior,omitempty"`
		} `json:"fallback,omitempty"`
		Advanced *struct {
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			MetricType        string            `json:"metricType,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// natsJetStreamTrigger lists the metadata of KEDA's nats-jetstream scaler.
var natsJetStreamTrigger = map[string]bool{
	"natsServerMonitoringEndpoint": true, "account": true, "stream": true, "consumer": true,
	"lagThreshold": true, "activationLagThreshold": true, "useHttps": true,
}

// podMonitor is the Prometheus Operator's PodMonitor
// (monitoring.coreos.com/v1), the fields of its CRD this project uses.
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path,omitempty"`
			Interval string `json:"interval,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// manifests holds every object of deploy/k8s, strictly decoded.
type manifests struct {
	files        []string
	namespaces   []*corev1.Namespace
	configMaps   []*corev1.ConfigMap
	secrets      []*corev1.Secret
	services     []*corev1.Service
	deployments  []*appsv1.Deployment
	jobs         []*batchv1.Job
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	pdbs         []*policyv1.PodDisruptionBudget
	scaledObject []*scaledObject
	netpols      []*networkingv1.NetworkPolicy
	podMonitors  []*podMonitor
	promRules    []*prometheusRule
}

// splitDocs splits a multi-document YAML file.
func splitDocs(data []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// strictDecode decodes a YAML document into v as the API server does:
// field names case-sensitive, unknown and duplicate fields refused
// (sigs.k8s.io/json). encoding/json alone would accept a field name that
// differs in case only (readOnlyRootFileSystem).
func strictDecode(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// strict decodes doc into v with strictDecode, failing t on error.
func strict(t *testing.T, where string, doc []byte, v any) {
	t.Helper()
	if err := strictDecode(doc, v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// decodeTo decodes doc strictly into a new T and appends it to list.
func decodeTo[T any](t *testing.T, where string, doc []byte, list *[]*T) {
	t.Helper()
	v := new(T)
	strict(t, where, doc, v)
	*list = append(*list, v)
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{}
	for _, p := range paths {
		if filepath.Base(p) == "nats-values.yaml" {
			continue // Helm values, checked by TestNATSHelmValues
		}
		m.files = append(m.files, filepath.ToSlash(p))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(data) {
			where := fmt.Sprintf("%s#%d", p, i)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				decodeTo(t, where, doc, &m.namespaces)
			case "v1 ConfigMap":
				decodeTo(t, where, doc, &m.configMaps)
			case "v1 Secret":
				decodeTo(t, where, doc, &m.secrets)
			case "v1 Service":
				decodeTo(t, where, doc, &m.services)
			case "apps/v1 Deployment":
				decodeTo(t, where, doc, &m.deployments)
			case "batch/v1 Job":
				decodeTo(t, where, doc, &m.jobs)
			case "autoscaling/v2 HorizontalPodAutoscaler":
				decodeTo(t, where, doc, &m.hpas)
			case "policy/v1 PodDisruptionBudget":
				decodeTo(t, where, doc, &m.pdbs)
			case "networking.k8s.io/v1 NetworkPolicy":
				decodeTo(t, where, doc, &m.netpols)
			case "monitoring.coreos.com/v1 PodMonitor":
				decodeTo(t, where, doc, &m.podMonitors)
			case "monitoring.coreos.com/v1 PrometheusRule":
				decodeTo(t, where, doc, &m.promRules)
			case "keda.sh/v1alpha1 ScaledObject":
				decodeTo(t, where, doc, &m.scaledObject)
			default:
				t.Fatalf("%s: unexpected kind %q %q", where, tm.APIVersion, tm.Kind)
			}
		}
	}
	return m
}

func (m *manifests) deployment(name string) *appsv1.Deployment {
	for _, d := range m.deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// matching returns the deployments whose pods sel selects.
func (m *manifests) matching(t *testing.T, sel *metav1.LabelSelector) []string {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range m.deployments {
		if s.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d.Name)
		}
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	if len(m.deployments) < 3 || len(m.services) < 3 || len(m.hpas) != 1 || len(m.scaledObject) < 2 || len(m.pdbs) < 3 || len(m.jobs) != 1 {
		t.Fatalf("missing objects: %d deployments, %d services, %d HPA, %d ScaledObjects, %d PDBs, %d jobs",
			len(m.deployments), len(m.services), len(m.hpas), len(m.scaledObject), len(m.pdbs), len(m.jobs))
	}
	users := natsUsersFromAccounts(t)
	secretKeys := map[string]bool{}
	for _, s := range m.secrets {
		for k := range s.StringData {
			secretKeys[k] = true
		}
	}
	for u := range natsUsers {
		if !secretKeys[u] {
			t.Errorf("example secret lacks user %s", u)
		}
	}
	configKeys := map[string]bool{}
	for _, cm := range m.configMaps {
		for k := range cm.Data {
			configKeys[k] = true
		}
	}
	for _, k := range []string{"E2A_NATS_URL", "E2A_REPLICAS", "E2A_HTTP_ADDR"} {
		if !configKeys[k] {
			t.Errorf("e2a-config lacks %s", k)
		}
	}
	for _, ns := range m.namespaces {
		if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("namespace %s does not enforce the restricted pod security standard", ns.Name)
		}
	}

	checkPod := func(kind, name string, spec corev1.PodSpec, probes bool) {
		t.Helper()
		where := kind + " " + name
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod security context %+v", where, psc)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: service account token mounted", where)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s/%s: container security context %+v", where, c.Name, sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: resources %+v", where, c.Name, c.Resources)
			}
			if c.Image != "e2a-pipeline/e2a:"+imageTag(t) {
				t.Errorf("%s/%s: image %q, want e2a-pipeline/e2a:%s (kustomization.yaml)", where, c.Name, c.Image, imageTag(t))
			}
			if v := restrictedViolations(t, metav1.ObjectMeta{Name: name}, &spec); len(v) > 0 {
				t.Errorf("%s: refused by Pod Security restricted: %v", where, v)
			}
			// NATS over TLS: the CA mounted where E2A_NATS_TLS_CA says.
			ca := configMapEnv(t)["E2A_NATS_TLS_CA"]
			mounted := false
			for _, vm := range c.VolumeMounts {
				for _, v := range spec.Volumes {
					if v.Name == vm.Name && v.Secret != nil && v.Secret.SecretName == "nats-server-tls" &&
						len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "ca.crt" && vm.MountPath+"/"+v.Secret.Items[0].Path == ca {
						mounted = true
					}
				}
			}
			if !mounted {
				t.Errorf("%s/%s: the NATS CA (secret nats-server-tls, ca.crt only) is not mounted at %s", where, c.Name, ca)
			}
			user, hasPassword := "", false
			for _, e := range c.Env {
				switch e.Name {
				case "E2A_NATS_USER":
					user = e.Value
				case "E2A_NATS_PASSWORD":
					hasPassword = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
					if hasPassword && e.ValueFrom.SecretKeyRef.Key != user {
						t.Errorf("%s/%s: password of %q read from key %q", where, c.Name, user, e.ValueFrom.SecretKeyRef.Key)
					}
				}
			}
			if !users[user] || !hasPassword {
				t.Errorf("%s/%s: NATS user %q (in accounts.conf: %v), password from a secret: %v", where, c.Name, user, users[user], hasPassword)
			}
			checkMemoryLimit(t, where, c)
			if !probes {
				continue
			}
			for probe, want := range map[string]struct {
				p    *corev1.Probe
				path string
			}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}, "startup": {c.StartupProbe, "/healthz"}} {
				if want.p == nil || want.p.HTTPGet == nil || want.p.HTTPGet.Path != want.path || want.p.HTTPGet.Port.String() != "http" {
					t.Errorf("%s/%s: %s probe %+v, want GET %s on port http", where, c.Name, probe, want.p, want.path)
				}
			}
			if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
				t.Errorf("%s/%s: ports %+v", where, c.Name, c.Ports)
			}
		}
	}

	for _, d := range m.deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("deployment %s: selector does not select its pods (%v)", d.Name, err)
		}
		checkPod("deployment", d.Name, d.Spec.Template.Spec, true)
		args := d.Spec.Template.Spec.Containers[0].Args
		switch {
		case len(args) > 0 && args[0] == "serve":
			// Ingress auth from a secret.
			auth := false
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "E2A_API_KEYS" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "e2a-ingress-auth" {
					auth = true
				}
			}
			if !auth {
				t.Errorf("deployment %s: E2A_API_KEYS not from the secret e2a-ingress-auth", d.Name)
			}
			checkSealKey(t, d)
		case len(args) == 1 && args[0] == "push":
			if u := envVar(d.Spec.Template.Spec.Containers[0], "E2A_NATS_USER").Value; u != "push" {
				t.Errorf("deployment %s: the push stage runs as NATS user %q, want push", d.Name, u)
			}
			checkSealKey(t, d)
		case len(args) == 1 && args[0] == "archive":
			// One archiver, as the NATS user archive; no autoscaler (a
			// second replica only does the work twice), and a rollout
			// that never leaves the archive without one.
			if u := envVar(d.Spec.Template.Spec.Containers[0], "E2A_NATS_USER").Value; u != "archive" {
				t.Errorf("deployment %s: the archiver runs as NATS user %q, want archive", d.Name, u)
			}
			ru := d.Spec.Strategy.RollingUpdate
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
				ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
				t.Errorf("deployment %s: replicas %v, strategy %+v; want 1, a rolling update with none unavailable", d.Name, d.Spec.Replicas, d.Spec.Strategy)
			}
		case len(args) >= 3 && args[0] == "agent" && args[1] == "--pool":
			c := d.Spec.Template.Spec.Containers[0]
			if want, u := "agent-"+args[2], envVar(c, "E2A_NATS_USER").Value; u != want {
				t.Errorf("deployment %s: pool %s runs as NATS user %q, want %q", d.Name, args[2], u, want)
			}
			// Frames name the pod that wrote them.
			if w := envVar(c, "E2A_AGENT_WORKER_ID").ValueFrom; w == nil || w.FieldRef == nil || w.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("deployment %s: E2A_AGENT_WORKER_ID is not the pod's name", d.Name)
			}
		default:
			t.Errorf("deployment %s: args %q", d.Name, args)
		}
		// Every deployment has a PDB and exactly one autoscaler.
		var pdbs, scalers int
		for _, p := range m.pdbs {
			if slices.Contains(m.matching(t, p.Spec.Selector), d.Name) {
				pdbs++
			}
		}
		for _, h := range m.hpas {
			if h.Spec.ScaleTargetRef.Kind == "Deployment" && h.Spec.ScaleTargetRef.Name == d.Name {
				scalers++
			}
		}
		for _, so := range m.scaledObject {
			if so.Spec.ScaleTargetRef.Name == d.Name {
				scalers++
			}
		}
		wantScalers := 1
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == "archive" {
			wantScalers = 0
		}
		if pdbs != 1 || scalers != wantScalers {
			t.Errorf("deployment %s: %d PDBs, %d autoscalers; want 1 and %d", d.Name, pdbs, scalers, wantScalers)
		}
	}
	for _, j := range m.jobs {
		checkPod("job", j.Name, j.Spec.Template.Spec, false)
		if c := j.Spec.Template.Spec.Containers[0]; !slices.Equal(c.Args, []string{"streams", "apply"}) || c.Env[0].Value != "admin" {
			t.Errorf("job %s: args %q user %q", j.Name, c.Args, c.Env[0].Value)
		}
	}
	for _, s := range m.services {
		if got := m.matching(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}); len(got) != 1 {
			t.Errorf("service %s selects deployments %v", s.Name, got)
		}
	}
	for _, h := range m.hpas {
		d := m.deployment(h.Spec.ScaleTargetRef.Name)
		if d == nil || h.Spec.ScaleTargetRef.APIVersion != "apps/v1" || h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HPA %s: %+v", h.Name, h.Spec)
		}
	}
	for _, so := range m.scaledObject {
		d := m.deployment(so.Spec.ScaleTargetRef.Name)
		if d == nil {
			t.Errorf("ScaledObject %s targets %q", so.Metadata.Name, so.Spec.ScaleTargetRef.Name)
			continue
		}
		if len(so.Spec.Triggers) != 1 {
			t.Fatalf("ScaledObject %s: %d triggers", so.Metadata.Name, len(so.Spec.Triggers))
		}
		tr := so.Spec.Triggers[0]
		if tr.Type != "nats-jetstream" {
			t.Errorf("ScaledObject %s: trigger %q", so.Metadata.Name, tr.Type)
		}
		for k := range tr.Metadata {
			if !natsJetStreamTrigger[k] {
				t.Errorf("ScaledObject %s: unknown nats-jetstream metadata %q", so.Metadata.Name, k)
			}
		}
		if !strings.HasSuffix(tr.Metadata["natsServerMonitoringEndpoint"], ":8222") || tr.Metadata["lagThreshold"] == "" {
			t.Errorf("ScaledObject %s: metadata %v", so.Metadata.Name, tr.Metadata)
		}
		if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 1 {
			t.Errorf("ScaledObject %s: min replicas must be ≥ 1", so.Metadata.Name)
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; len(args) == 1 && args[0] == "push" {
			// The push stage scales on its consumer of the frames.
			want := map[string]string{"account": "E2A", "stream": "E2A_RESPONSES", "consumer": "push"}
			for k, v := range want {
				if tr.Metadata[k] != v {
					t.Errorf("ScaledObject %s: %s = %q, want %q", so.Metadata.Name, k, tr.Metadata[k], v)
				}
			}
			continue
		}
		pool := d.Spec.Template.Spec.Containers[0].Args[2]
		want := map[string]string{"account": "E2A", "stream": "E2A_REQUESTS", "consumer": "agent-" + pool}
		for k, v := range want {
			if tr.Metadata[k] != v {
				t.Errorf("ScaledObject %s: %s = %q, want %q", so.Metadata.Name, k, tr.Metadata[k], v)
			}
		}
		// More workers than the consumer lets have requests in flight
		// would idle: replicas × concurrency ≤ MaxAckPending.
		args := d.Spec.Template.Spec.Containers[0].Args
		if i := slices.Index(args, "--concurrency"); i < 0 || i+1 >= len(args) {
			t.Errorf("deployment %s: no --concurrency", d.Name)
		} else if n, err := strconv.Atoi(args[i+1]); err != nil || so.Spec.MaxReplicaCount == nil || int(*so.Spec.MaxReplicaCount)*n > agent.DefaultMaxAckPending {
			t.Errorf("ScaledObject %s: %v replicas × concurrency %s exceed MaxAckPending %d", so.Metadata.Name, so.Spec.MaxReplicaCount, args[i+1], agent.DefaultMaxAckPending)
		} else if lag, err := strconv.Atoi(tr.Metadata["lagThreshold"]); err != nil || lag > n {
			t.Errorf("ScaledObject %s: lagThreshold %q above the concurrency %d of a replica", so.Metadata.Name, tr.Metadata["lagThreshold"], n)
		}
	}

	checkMonitoringAndNetwork(t, m)

	// The kustomization lists every manifest file and the accounts file.
	var k struct {
		APIVersion         string   `json:"apiVersion"`
		Kind               string   `json:"kind"`
		Namespace          string   `json:"namespace"`
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Name    string   `json:"name"`
			Files   []string `json:"files"`
			Options struct {
				DisableNameSuffixHash bool              `json:"disableNameSuffixHash"`
				Labels                map[string]string `json:"labels"`
			} `json:"options"`
		} `json:"configMapGenerator"`
		Images []struct {
			Name    string `json:"name"`
			NewTag  string `json:"newTag"`
			NewName string `json:"newName,omitempty"`
		} `json:"images"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	strict(t, "kustomization.yaml", data, &k)
	var listed []string
	for _, f := range m.files {
		if !strings.HasSuffix(f, ".example.yaml") {
			listed = append(listed, f)
		}
	}
	sort.Strings(listed)
	res := slices.Clone(k.Resources)
	sort.Strings(res)
	if !slices.Equal(res, listed) {
		t.Errorf("kustomization resources %v, manifests %v", res, listed)
	}
	if len(k.ConfigMapGenerator) != 1 || k.ConfigMapGenerator[0].Name != "nats-e2a-accounts" ||
		!slices.Equal(k.ConfigMapGenerator[0].Files, []string{"nats/accounts.conf"}) || !k.ConfigMapGenerator[0].Options.DisableNameSuffixHash {
		t.Errorf("kustomization configMapGenerator %+v", k.ConfigMapGenerator)
	}
}

// natsUsersFromAccounts returns the user names of deploy/nats/accounts.conf.
func natsUsersFromAccounts(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{user = ([a-z-]+),`).FindAllSubmatch(data, -1) {
		out[string(m[1])] = true
	}
	if len(out) != len(natsUsers) {
		t.Fatalf("accounts.conf users %v, test knows %d", out, len(natsUsers))
	}
	return out
}

// TestManifestsRejectUnknownFields makes sure the strict decoding above
// does catch a misspelt field (the test would be worthless otherwise).
func TestManifestsRejectUnknownFields(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("k8s", "serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := splitDocs(data)[0]
	bad := bytes.Replace(doc, []byte("readOnlyRootFilesystem"), []byte("readOnlyRootFileSystem"), 1)
	if err := strictDecode(bad, &appsv1.Deployment{}); err == nil {
		t.Fatal("a misspelt field decoded")
	}
	if err := strictDecode(append(append([]byte{}, doc...), []byte("\nextra: 1\n")...), &appsv1.Deployment{}); err == nil {
		t.Fatal("an unknown field decoded")
	}
	so, err := os.ReadFile(filepath.Join("k8s", "agent-demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var scaled []byte
	for _, d := range splitDocs(so) {
		if bytes.Contains(d, []byte("kind: ScaledObject")) {
			scaled = d
		}
	}
	bad = bytes.Replace(scaled, []byte("minReplicaCount"), []byte("minReplicas"), 1)
	if err := strictDecode(bad, &scaledObject{}); err == nil {
		t.Fatal("a misspelt ScaledObject field decoded")
	}
}

// imageTag is the e2a image tag of deploy/kustomization.yaml; it must be
// a version, not "latest", and the compose file and the Dockerfile's
// VERSION must say the same.
func imageTag(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+newTag: "?([^"\s]+)"?$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("kustomization.yaml: no images.newTag")
	}
	tag := string(m[1])
	if tag == "latest" || !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(tag) {
		t.Fatalf("kustomization.yaml: image tag %q is not a version", tag)
	}
	return tag
}

// natsPodLabels are the labels the NATS Helm chart gives its pods
// (release "nats": nats.selectorLabels).
var natsPodLabels = labels.Set{"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "nats", "app.kubernetes.io/component": "nats"}

// checkMonitoringAndNetwork checks the PodMonitor (every e2a Deployment's
// pods scraped on their port http), the PrometheusRule (deploy/prometheus
// verbatim, see TestAlertRules) and the NetworkPolicies: NATS accepts
// clients (4222) from every e2a pod and routes (6222) from its peers, and
// every e2a pod may reach NATS on 4222.
func checkMonitoringAndNetwork(t *testing.T, m *manifests) {
	t.Helper()
	if len(m.podMonitors) != 1 || len(m.promRules) != 1 {
		t.Fatalf("%d PodMonitors, %d PrometheusRules", len(m.podMonitors), len(m.promRules))
	}
	pm := m.podMonitors[0]
	if got := m.matching(t, &pm.Spec.Selector); len(got) != len(m.deployments) {
		t.Errorf("PodMonitor selects %v, want every deployment", got)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port != "http" || pm.Spec.PodMetricsEndpoints[0].Path != "/metrics" {
		t.Errorf("PodMonitor endpoints %+v", pm.Spec.PodMetricsEndpoints)
	}
	type pod struct {
		name   string
		labels labels.Set
	}
	var pods []pod
	for _, d := range m.deployments {
		pods = append(pods, pod{d.Name, d.Spec.Template.Labels})
	}
	for _, j := range m.jobs {
		pods = append(pods, pod{j.Name, j.Spec.Template.Labels})
	}
	selects := func(sel *metav1.LabelSelector, l labels.Set) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(l)
	}
	hasPort := func(ports []networkingv1.NetworkPolicyPort, port int) bool {
		for _, p := range ports {
			if p.Port != nil && p.Port.IntValue() == port {
				return true
			}
		}
		return false
	}
	// NATS ingress.
	var natsPol *networkingv1.NetworkPolicy
	for _, np := range m.netpols {
		if selects(&np.Spec.PodSelector, natsPodLabels) {
			if natsPol != nil {
				t.Errorf("NATS pods selected by %s and %s", natsPol.Name, np.Name)
			}
			natsPol = np
		}
		for _, p := range pods {
			if selects(&np.Spec.PodSelector, p.labels) && selects(&np.Spec.PodSelector, natsPodLabels) {
				t.Errorf("policy %s selects both NATS and %s", np.Name, p.name)
			}
		}
	}
	if natsPol == nil || !slices.Equal(natsPol.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Fatalf("no ingress policy for the NATS pods: %+v", natsPol)
	}
	clientFrom := func(l labels.Set, port int) bool {
		for _, r := range natsPol.Spec.Ingress {
			for _, f := range r.From {
				if f.PodSelector != nil && f.NamespaceSelector == nil && selects(f.PodSelector, l) && hasPort(r.Ports, port) {
					return true
				}
			}
		}
		return false
	}
	for _, p := range pods {
		if !clientFrom(p.labels, 4222) {
			t.Errorf("NATS does not accept clients from %s", p.name)
		}
		if clientFrom(p.labels, 6222) {
			t.Errorf("NATS accepts routes from %s", p.name)
		}
	}
	if !clientFrom(natsPodLabels, 6222) {
		t.Errorf("NATS does not accept routes from its peers")
	}
	for _, r := range natsPol.Spec.Ingress {
		for _, f := range r.From {
			if f.IPBlock != nil || f.PodSelector == nil && f.NamespaceSelector == nil {
				t.Errorf("NATS accepts %+v", f)
			}
		}
	}
	// e2a ingress: every pod but serve's (the API) accepts HTTP only from
	// the namespace monitoring, on 8080 (its /metrics).
	for _, d := range m.deployments {
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == "serve" {
			continue
		}
		selected := false
		for _, np := range m.netpols {
			if !selects(&np.Spec.PodSelector, d.Spec.Template.Labels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				continue
			}
			selected = true
			for _, r := range np.Spec.Ingress {
				for _, f := range r.From {
					if f.PodSelector != nil || f.IPBlock != nil || f.NamespaceSelector == nil ||
						f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" || len(r.Ports) != 1 || !hasPort(r.Ports, 8080) {
						t.Errorf("%s: policy %s lets in %+v on %+v", d.Name, np.Name, f, r.Ports)
					}
				}
			}
		}
		if !selected {
			t.Errorf("%s: no ingress policy (its /metrics open to every pod)", d.Name)
		}
	}
	// e2a egress: each pod is selected by an egress policy letting it
	// reach NATS on 4222.
	for _, p := range pods {
		ok := false
		for _, np := range m.netpols {
			if !selects(&np.Spec.PodSelector, p.labels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				continue
			}
			for _, r := range np.Spec.Egress {
				for _, to := range r.To {
					if to.PodSelector != nil && selects(to.PodSelector, natsPodLabels) && hasPort(r.Ports, 4222) {
						ok = true
					}
				}
			}
		}
		if !ok {
			t.Errorf("%s: no egress policy lets it reach NATS on 4222", p.name)
		}
	}
}

// TestDockerfile checks deploy/Dockerfile: the Go toolchain of go.mod's go
// directive, the runtime image pinned by digest, the version the
// manifests deploy, and a .dockerignore that keeps secrets and the git
// history out of the build context.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod: no go directive")
	}
	for _, want := range []string{
		"ARG GO_VERSION=" + string(goVersion[1]) + "\n",
		"ARG VERSION=" + imageTag(t) + "\n",
		"FROM golang:${GO_VERSION}-bookworm AS build",
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, from := range regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllSubmatch(data, -1) {
		img := string(from[1])
		if !strings.Contains(img, "@sha256:") && !strings.Contains(img, "${GO_VERSION}") {
			t.Errorf("base image %s is pinned neither by digest nor by exact version", img)
		}
	}
	ignore, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "**/*.key", "**/*.env", "deploy"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

// envVar returns the container's variable name (zero when it has none).
// checkMemoryLimit checks that an e2a container gives the process its
// memory limit in bytes as E2A_MEMORY_LIMIT (resourceFieldRef, no divisor,
// its own container's), from which e2a sets Go's soft limit to 90 % of it,
// and sets no GOMEMLIMIT, which would win over it. The manifests set
// GOMEMLIMIT to 100 % of the limit: no headroom for what the Go runtime
// does not manage, the collector hardest at work when the kernel
// OOM-kills the container.
func checkMemoryLimit(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	if e := envVar(c, "GOMEMLIMIT"); e.Name != "" {
		t.Errorf("%s/%s: GOMEMLIMIT set: it wins over E2A_MEMORY_LIMIT's 90 %%, leaving no headroom", where, c.Name)
	}
	ref := envVar(c, "E2A_MEMORY_LIMIT").ValueFrom
	if ref == nil || ref.ResourceFieldRef == nil {
		t.Errorf("%s/%s: no E2A_MEMORY_LIMIT from resourceFieldRef limits.memory", where, c.Name)
		return
	}
	r := ref.ResourceFieldRef
	if r.Resource != "limits.memory" || (r.ContainerName != "" && r.ContainerName != c.Name) ||
		(!r.Divisor.IsZero() && r.Divisor.Value() != 1) {
		t.Errorf("%s/%s: E2A_MEMORY_LIMIT from %+v, want limits.memory of this container in bytes (no divisor)", where, c.Name, r)
	}
}

func envVar(c corev1.Container, name string) corev1.EnvVar {
	for _, e := range c.Env {
		if e.Name == name {
			return e
		}
	}
	return corev1.EnvVar{}
}

// checkSealKey checks that deployment d (serve, which stores push configs,
// or the push stage, which sends them) reads E2A_PUSH_SEAL_KEY from the
// secret e2a-push-seal, mounted read-only: both must seal and open with
// the same key.
func checkSealKey(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	path := envVar(spec.Containers[0], "E2A_PUSH_SEAL_KEY").Value
	for _, m := range spec.Containers[0].VolumeMounts {
		if !m.ReadOnly || !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "e2a-push-seal" {
				for _, it := range v.Secret.Items {
					if m.MountPath+"/"+it.Path == path {
						return
					}
				}
			}
		}
	}
	t.Errorf("deployment %s: E2A_PUSH_SEAL_KEY %q is not a file of the secret e2a-push-seal mounted read-only", d.Name, path)
}

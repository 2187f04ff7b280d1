package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// natsPodScheduling returns the topology spread constraints and affinity of
// the NATS pods as the Helm chart renders them from nats-values.yaml
// (files/stateful-set/pod-template.yaml: one constraint per key of
// podTemplate.topologySpreadConstraints, its topologyKey that key and its
// labelSelector the chart's selector labels, the value merged over them;
// podTemplate.merge.spec merged into the pod's spec).
func natsPodScheduling(t *testing.T) ([]corev1.TopologySpreadConstraint, *corev1.Affinity) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("k8s", "nats-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		PodTemplate struct {
			Merge struct {
				Spec struct {
					Affinity *corev1.Affinity `json:"affinity"`
				} `json:"spec"`
			} `json:"merge"`
			TopologySpreadConstraints map[string]map[string]any `json:"topologySpreadConstraints"`
		} `json:"podTemplate"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	selector := map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "nats"}}
	var out []corev1.TopologySpreadConstraint
	for key, over := range v.PodTemplate.TopologySpreadConstraints {
		m := map[string]any{"topologyKey": key, "labelSelector": selector}
		for k, x := range over {
			m[k] = x
		}
		j, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var c corev1.TopologySpreadConstraint
		if err := strictDecode(j, &c); err != nil {
			t.Fatalf("podTemplate.topologySpreadConstraints[%s]: %v", key, err)
		}
		out = append(out, c)
	}
	return out, v.PodTemplate.Merge.Spec.Affinity
}

// placement is a toy scheduler of the filters that keep NATS servers
// apart: PodTopologySpread with DoNotSchedule (maxSkew, minDomains: below
// minDomains eligible domains the global minimum counts as 0) and required
// inter-pod anti-affinity, on nodes that carry only
// kubernetes.io/hostname. Scoring is left out on purpose: any feasible
// node may be chosen, so place picks the worst (the fullest).
type placement struct {
	spread   []corev1.TopologySpreadConstraint
	affinity *corev1.Affinity
	pods     map[string]int // node → NATS pods on it
	nodes    []string
}

func (p *placement) feasible(t *testing.T, node string) bool {
	t.Helper()
	for _, c := range p.spread {
		if c.TopologyKey != "kubernetes.io/hostname" || c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if !selects(t, c.LabelSelector, natsPodLabels) {
			continue // the constraint counts other pods
		}
		minDomains := 1
		if c.MinDomains != nil {
			minDomains = int(*c.MinDomains)
		}
		globalMin := 0
		if len(p.nodes) >= minDomains {
			globalMin = p.pods[p.nodes[0]]
			for _, n := range p.nodes {
				globalMin = min(globalMin, p.pods[n])
			}
		}
		if p.pods[node]+1-globalMin > int(c.MaxSkew) {
			return false
		}
	}
	if p.affinity == nil || p.affinity.PodAntiAffinity == nil {
		return true
	}
	for _, term := range p.affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == "kubernetes.io/hostname" && selects(t, term.LabelSelector, natsPodLabels) && p.pods[node] > 0 {
			return false
		}
	}
	return true
}

// place schedules one NATS pod on the fullest feasible node, or reports
// that it stays Pending.
func (p *placement) place(t *testing.T) bool {
	t.Helper()
	best := ""
	for _, n := range p.nodes {
		if p.feasible(t, n) && (best == "" || p.pods[n] > p.pods[best]) {
			best = n
		}
	}
	if best == "" {
		return false
	}
	p.pods[best]++
	return true
}

func selects(t *testing.T, sel *metav1.LabelSelector, l labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(l)
}

// TestNATSServersOnePerNode: the three NATS servers of nats-values.yaml
// never share a node, however many nodes the scheduler may use: two on one
// node would lose two of each stream's three replicas, the quorum, with
// that node. With 3 or more nodes all three run; with fewer, the third
// stays Pending rather than joining another server (a maxSkew of 1 alone
// put two on one node of a 2-node cluster).
func TestNATSServersOnePerNode(t *testing.T) {
	spread, affinity := natsPodScheduling(t)
	if len(spread) == 0 && affinity == nil {
		t.Fatal("nats-values.yaml: no topology spread constraint and no affinity for the NATS pods")
	}
	for nodes := 1; nodes <= 5; nodes++ {
		p := &placement{spread: spread, affinity: affinity, pods: map[string]int{}}
		for i := range nodes {
			p.nodes = append(p.nodes, fmt.Sprintf("node-%d", i))
		}
		placed := 0
		for range 3 {
			if p.place(t) {
				placed++
			}
		}
		for n, k := range p.pods {
			if k > 1 {
				t.Errorf("%d nodes: %d NATS servers on %s (%v)", nodes, k, n, p.pods)
			}
		}
		if nodes >= 3 && placed != 3 {
			t.Errorf("%d nodes: %d of 3 NATS servers scheduled (%v)", nodes, placed, p.pods)
		}
	}
}

package deploy

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestWorkflowFileStorageOff: the shipped deployments turn the workflow
// pool's StoreData "file" off (E2A_WORKFLOW_FILE_DIR=off, for serve's
// validation too). It was on: with the read-only root filesystem the pool
// wrote the clients' files into the pod's /tmp, a 64 MiB emptyDir (a
// tmpfs under compose), where they were lost with the pod, unseen by the
// other replicas, and 129 stores of 512 KiB got the pod evicted.
func TestWorkflowFileStorageOff(t *testing.T) {
	m := loadManifests(t)
	var shared string
	for _, cm := range m.configMaps {
		if cm.Name == "e2a-config" {
			shared = cm.Data["E2A_WORKFLOW_FILE_DIR"]
		}
	}
	for _, name := range []string{"e2a-agent-workflow", "e2a-serve"} {
		dep := m.deployment(name)
		if dep == nil {
			t.Fatalf("no Deployment %s", name)
		}
		v := shared
		if e := envVar(dep.Spec.Template.Spec.Containers[0], "E2A_WORKFLOW_FILE_DIR"); e.Name != "" {
			v = e.Value
		}
		if v != "off" {
			t.Errorf("%s: E2A_WORKFLOW_FILE_DIR is %q, want off: its root filesystem is read-only and /tmp an emptyDir", name, v)
		}
	}
	compose, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s+E2A_WORKFLOW_FILE_DIR: "off"$`).Match(compose) {
		t.Error(`compose/compose.yaml: E2A_WORKFLOW_FILE_DIR: "off" is not in the e2a services' environment (read-only root, /tmp a tmpfs)`)
	}
}

// TestTracingReachesCollector: k8s/config.yaml (and README, "W3C trace
// context") say uncommenting OTEL_EXPORTER_OTLP_ENDPOINT turns the spans
// on, towards a collector in the namespace observability; the shipped
// NetworkPolicies let every e2a Deployment's pods reach it. They let them
// reach NATS, DNS (and public addresses for some) only: no span left.
func TestTracingReachesCollector(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("k8s", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mm := regexp.MustCompile(`(?m)^\s*#\s*OTEL_EXPORTER_OTLP_ENDPOINT:\s*(\S+)`).FindSubmatch(data)
	if mm == nil {
		t.Fatal("k8s/config.yaml no longer offers an OTLP endpoint (commented): say where tracing is turned on, and test that")
	}
	u, err := url.Parse(string(mm[1]))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	host := strings.Split(u.Hostname(), ".")
	ns := "e2a"
	if len(host) > 1 {
		ns = host[1] // service.namespace[.svc…]
	}
	m := loadManifests(t)
	for _, d := range m.deployments {
		if ok, by := egressAllowed(t, m.netpols, d.Spec.Template.Labels, ns, port); !ok {
			t.Errorf("%s: k8s/config.yaml offers OTEL_EXPORTER_OTLP_ENDPOINT=%s (uncomment to turn tracing on), but the NetworkPolicies selecting its pods (%v) let no traffic to namespace %s port %d out: the spans are never exported",
				d.Name, mm[1], by, ns, port)
		}
	}
}

// egressAllowed says whether the egress policies selecting pods labelled
// l let them open TCP port to some pod of namespace ns (any labels), and
// names the policies that select them.
func egressAllowed(t *testing.T, pols []*networkingv1.NetworkPolicy, l labels.Set, ns string, port int) (bool, []string) {
	t.Helper()
	// Pod addresses a cluster may use (each private range but one).
	podIPs := []string{"10.244.1.7", "172.20.1.7", "192.168.1.7", "100.64.1.7"}
	return egressTo(t, pols, l, labels.Set{"kubernetes.io/metadata.name": ns}, podIPs, port)
}

// egressTo says whether the egress policies selecting pods labelled l let
// them open TCP port to a destination: a pod of the namespace labelled
// nsLabels at one of ips, or, nsLabels nil, an address outside the
// cluster among ips (namespace and pod selectors select pods only).
// Policies are additive; a pod no egress policy selects may reach
// anything. It names the policies that select the pods.
func egressTo(t *testing.T, pols []*networkingv1.NetworkPolicy, l, nsLabels labels.Set, ips []string, port int) (bool, []string) {
	t.Helper()
	sel := func(s *metav1.LabelSelector, set labels.Set) bool {
		x, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return x.Matches(set)
	}
	var by []string
	for _, np := range pols {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !sel(&np.Spec.PodSelector, l) {
			continue
		}
		by = append(by, np.Name)
		for _, r := range np.Spec.Egress {
			portOK := len(r.Ports) == 0
			for _, p := range r.Ports {
				if p.Port == nil || p.Port.IntValue() == port ||
					(p.EndPort != nil && p.Port.IntValue() <= port && port <= int(*p.EndPort)) {
					portOK = true
				}
			}
			if !portOK {
				continue
			}
			if len(r.To) == 0 {
				return true, by
			}
			for _, to := range r.To {
				switch {
				case nsLabels != nil && to.NamespaceSelector != nil && sel(to.NamespaceSelector, nsLabels) &&
					(to.PodSelector == nil || len(to.PodSelector.MatchLabels)+len(to.PodSelector.MatchExpressions) == 0):
					return true, by
				case to.IPBlock != nil:
					for _, ip := range ips {
						if inBlock(t, to.IPBlock, ip) {
							return true, by
						}
					}
				}
			}
		}
	}
	return len(by) == 0, by
}

func inBlock(t *testing.T, b *networkingv1.IPBlock, ip string) bool {
	t.Helper()
	addr := net.ParseIP(ip)
	_, n, err := net.ParseCIDR(b.CIDR)
	if err != nil {
		t.Fatal(err)
	}
	if !n.Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		if _, x, err := net.ParseCIDR(e); err == nil && x.Contains(addr) {
			return false
		}
	}
	return true
}

// TestHexPasswordsLoad: README's recipe makes
// each user's password with `openssl rand -hex 24`, and the server reads
// it through a config variable, which it lexes as a value: a password
// starting with digits then "e" (a number suffix) or "eb" and a digit once
// broke the parse. With nats-server of go.mod every such shape loads, as
// itself.
func TestHexPasswordsLoad(t *testing.T) {
	setNATSEnv(t)
	shapes := []string{
		"5e7bcd0123456789abcdef0123456789abcdef0123456789",
		"12e4567890abcdef0123456789abcdef0123456789abcdef",
		"3eb9f0123456789abcdef0123456789abcdef0123456789a",
		"0e000000000000000000000000000000000000000000000f",
		"7k1", // not hex, a number suffix then a digit
		"1e1ab",
	}
	i := 0
	want := map[string]string{}
	for user, v := range natsUsers {
		pw := shapes[i%len(shapes)]
		i++
		t.Setenv(v, pw)
		want[user] = pw
	}
	opts, err := server.ProcessConfigFile(natsConfigPath(t))
	if err != nil {
		t.Fatalf("a hex password breaks the configuration: %v", err)
	}
	got := userPerms(t, opts)
	for user, pw := range want {
		if u := got[user]; u == nil || u.Password != pw {
			t.Errorf("user %s: password read as %v, want %q", user, u, pw)
		}
	}
}

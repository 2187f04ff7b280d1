package deploy

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/push"
)

// publicResolver resolves every host to one public address (a webhook
// receiver on the Internet).
type publicResolver struct{ addr netip.Addr }

func (r publicResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{r.addr}, nil
}

// egressToPublic says whether the egress NetworkPolicies selecting pods
// labelled l let them open TCP port to the public address ip (egressTo),
// and names the policies that select them.
func egressToPublic(t *testing.T, pols []*networkingv1.NetworkPolicy, l labels.Set, ip string, port int) (bool, []string) {
	t.Helper()
	return egressTo(t, pols, l, nil, []string{ip}, port)
}

// TestPushWebhookPortsTheStageAcceptsAreReachable: docs/push.md's URL
// rules for a webhook are https, no user information, every address public
// (E2A_PUSH_ALLOW_HOSTS for http and private ones); nothing limits the port,
// and push.Store.Create (serve's CreateTaskPushNotificationConfig) accepts
// https://host:8443/, so deploy/k8s/networkpolicy.yaml's e2a-push-egress
// lets the push pods reach public addresses on every port. It opened only
// 443 and 80: a config the API accepted was never delivered by the shipped
// deployment (each attempt timed out at the dial, retried for 24 h, then
// dead-lettered), and nothing told the client at creation.
func TestPushWebhookPortsTheStageAcceptsAreReachable(t *testing.T) {
	const public = "93.184.215.14" // a public address (outbound.Special refuses none)
	_, nc := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store, err := push.NewStore(ctx, nc, push.WithResolver(publicResolver{netip.MustParseAddr(public)}))
	if err != nil {
		t.Fatal(err)
	}
	m := loadManifests(t)
	dep := m.deployment("e2a-push")
	if dep == nil {
		t.Fatal("no Deployment e2a-push")
	}
	podLabels := labels.Set(dep.Spec.Template.Labels)
	for i, raw := range []string{
		"https://hooks.example.com/notify",      // port 443
		"https://hooks.example.com:8443/notify", // a receiver on another port
		"https://hooks.example.com:9443/a2a/push",
	} {
		cfg, err := store.Create(ctx, "alice", push.Config{TaskID: "task-" + strconv.Itoa(i), URL: raw})
		if err != nil {
			t.Logf("%s: refused at creation (%v): not a deployment defect", raw, err)
			continue
		}
		u, err := url.Parse(cfg.URL)
		if err != nil {
			t.Fatal(err)
		}
		port := 443
		if p := u.Port(); p != "" {
			port, _ = strconv.Atoi(p)
		}
		if ok, by := egressToPublic(t, m.netpols, podLabels, public, port); !ok {
			t.Errorf("push.Store.Create accepted the webhook %s (config %s), but the NetworkPolicies selecting the e2a-push pods (%v) let no TCP to %s out: the stage can never deliver it; every update is retried for 24 h and dead-lettered",
				raw, cfg.ID, by, net.JoinHostPort(public, strconv.Itoa(port)))
		}
	}
}

package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// setNATSEnv sets every variable the NATS configuration reads.
func setNATSEnv(t *testing.T) {
	t.Helper()
	t.Setenv("SERVER_NAME", "nats-1")
	t.Setenv("E2A_NATS_STORE_DIR", t.TempDir())
	for user, v := range natsUsers {
		t.Setenv(v, "pw-"+user)
	}
	for _, kv := range newTestTLS(t).natsTLSEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

func userPerms(t *testing.T, opts *server.Options) map[string]*server.User {
	t.Helper()
	out := map[string]*server.User{}
	for _, u := range opts.Users {
		out[u.Username] = u
	}
	return out
}

// TestNATSServerConfig loads deploy/nats/nats-server.conf with the
// server's own parser and checks what the pipeline relies on.
func TestNATSServerConfig(t *testing.T) {
	setNATSEnv(t)
	opts, err := server.ProcessConfigFile(natsConfigPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if !opts.SyncAlways {
		t.Error("sync_interval is not always")
	}
	if opts.Cluster.Name != "e2a" || len(opts.Routes) != 3 {
		t.Errorf("cluster %q with %d routes", opts.Cluster.Name, len(opts.Routes))
	}
	if opts.MaxPayload < 8<<20 || opts.HTTPPort != 8222 || opts.Port != 4222 {
		t.Errorf("max_payload %d, http %d, port %d", opts.MaxPayload, opts.HTTPPort, opts.Port)
	}
	if opts.SystemAccount != "SYS" {
		t.Errorf("system account %q", opts.SystemAccount)
	}
	if opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil {
		t.Errorf("TLS: clients %v, routes %v", opts.TLSConfig != nil, opts.Cluster.TLSConfig != nil)
	}
	// The compose volumes are as large as the host's disk; the file is
	// sized for the Kubernetes volumes (nats-values.yaml, 100 GiB).
	checkStoreFits(t, "nats-server.conf", opts.JetStreamMaxStore, 100<<30)
	users := userPerms(t, opts)
	if len(users) != len(natsUsers) {
		t.Fatalf("users %v", slices.Sorted(func(yield func(string) bool) {
			for u := range users {
				if !yield(u) {
					return
				}
			}
		}))
	}
	for name, u := range users {
		if u.Password != "pw-"+name {
			t.Errorf("%s: password not from %s", name, natsUsers[name])
		}
		switch name {
		case "admin":
			if u.Account.Name != "E2A" || u.Permissions != nil {
				t.Errorf("admin: account %s, permissions %+v", u.Account.Name, u.Permissions)
			}
			continue
		case "sys":
			if u.Account.Name != "SYS" {
				t.Errorf("sys in account %s", u.Account.Name)
			}
			continue
		}
		if u.Account.Name != "E2A" || u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil {
			t.Errorf("%s: account %s, permissions %+v", name, u.Account.Name, u.Permissions)
			continue
		}
		for _, s := range append(slices.Clone(u.Permissions.Publish.Allow), u.Permissions.Subscribe.Allow...) {
			if !server.IsValidSubject(s) {
				t.Errorf("%s: invalid subject %q", name, s)
			}
			if s == ">" || strings.HasPrefix(s, "$JS.API.>") || s == "$JS.>" {
				t.Errorf("%s: allows everything with %q", name, s)
			}
		}
	}
	// Who may publish what, in a few words.
	pub := func(user string) []string { return users[user].Permissions.Publish.Allow }
	sub := func(user string) []string { return users[user].Permissions.Subscribe.Allow }
	for _, c := range []struct {
		user string
		list []string
		want []string
		not  []string
	}{
		{"ingress", pub("ingress"), []string{"e2a.req.>", "e2a.ctl.>"}, []string{"e2a.resp.>"}},
		{"egress", pub("egress"), []string{"$JS.API.DIRECT.GET.E2A_RESPONSES"}, []string{"e2a.req.>", "e2a.resp.>", "e2a.ctl.>"}},
		{"egress", sub("egress"), []string{"e2a.live.>"}, []string{"e2a.req.>"}},
		{"agent-demo", pub("agent-demo"), []string{"e2a.resp.>", "$JS.API.CONSUMER.MSG.NEXT.E2A_REQUESTS.agent-demo"}, []string{"e2a.req.>", "e2a.ctl.>"}},
		// A bridge pool writes its own card and conversation records, never
		// another pool's card; ingress reads cards, never a conversation.
		{"agent-bridge", pub("agent-bridge"), []string{"e2a.resp.>", "$KV.E2A_BRIDGE.pool.bridge", "$KV.E2A_BRIDGE.c.bridge.*", "$JS.API.STREAM.CREATE.KV_E2A_BRIDGE"},
			[]string{"e2a.req.>", "e2a.ctl.>", "$KV.E2A_BRIDGE.>", "$KV.E2A_BRIDGE.pool.*", "$JS.API.DIRECT.GET.KV_E2A_BRIDGE.>", "$JS.API.STREAM.DELETE.KV_E2A_BRIDGE"}},
		{"ingress", pub("ingress"), []string{"$JS.API.DIRECT.GET.KV_E2A_BRIDGE.$KV.E2A_BRIDGE.pool.*", "$JS.API.CONSUMER.LIST.E2A_REQUESTS"},
			[]string{"$KV.E2A_BRIDGE.>", "$JS.API.DIRECT.GET.KV_E2A_BRIDGE.>", "$JS.API.DIRECT.GET.KV_E2A_BRIDGE"}},
		{"audit", pub("audit"), []string{"$JS.API.DIRECT.GET.E2A_AUDIT"}, []string{"e2a.req.>", "e2a.resp.>", "e2a.ctl.>"}},
		// The read API answers from the audit history what the hot
		// streams dropped (E2A_HISTORY): egress, and so serve, read
		// E2A_AUDIT and E2A_ARCHIVE by direct get, as the audit user does.
		{"egress", pub("egress"), []string{"$JS.API.DIRECT.GET.E2A_AUDIT", "$JS.API.DIRECT.GET.E2A_AUDIT.>", "$JS.API.DIRECT.GET.E2A_ARCHIVE",
			"$JS.API.DIRECT.GET.E2A_ARCHIVE.>"}, []string{"e2a.archive.batches", "$JS.API.STREAM.PURGE.E2A_AUDIT"}},
		{"serve", pub("serve"), []string{"$JS.API.DIRECT.GET.E2A_AUDIT", "$JS.API.DIRECT.GET.E2A_AUDIT.>", "$JS.API.DIRECT.GET.E2A_ARCHIVE",
			"$JS.API.DIRECT.GET.E2A_ARCHIVE.>"}, []string{"e2a.archive.batches"}},
		{"serve", pub("serve"), []string{"e2a.req.>"}, []string{"e2a.resp.>"}},
		// The push stage reads frames and envelopes, keeps cursors and
		// dead-letters: it publishes no request, frame or cancel and
		// creates no stream.
		{"push", pub("push"), []string{"$JS.API.CONSUMER.MSG.NEXT.E2A_RESPONSES.push", "e2a.push.dead.>", "$KV.E2A_PUSH.>",
			"$JS.API.CONSUMER.MSG.NEXT.KV_E2A_PUSH.push-wake", "$JS.ACK.KV_E2A_PUSH.push-wake.>"},
			[]string{"e2a.req.>", "e2a.resp.>", "e2a.ctl.>", "$JS.API.STREAM.CREATE.E2A_PUSH_DEAD", "$JS.API.STREAM.CREATE.KV_E2A_PUSH"}},
		{"ingress", pub("ingress"), []string{"$KV.E2A_PUSH.>", "$JS.API.STREAM.INFO.E2A_RESPONSES"}, []string{"e2a.push.dead.>"}},
		// ListTasks and a task's next turn read E2A_TASKS with ordered
		// consumers filtered on the bucket's keys (created, deleted, flow
		// control), never an unfiltered or durable consumer on it.
		{"ingress", pub("ingress"), []string{"$JS.API.CONSUMER.CREATE.KV_E2A_TASKS.*.$KV.E2A_TASKS.>", "$JS.API.CONSUMER.DELETE.KV_E2A_TASKS.*",
			"$JS.FC.KV_E2A_TASKS.*.*"}, []string{"$JS.API.CONSUMER.CREATE.KV_E2A_TASKS.>", "$JS.API.CONSUMER.CREATE.KV_E2A_TASKS.*",
			"$JS.API.CONSUMER.MSG.NEXT.KV_E2A_TASKS.*", "$JS.API.STREAM.PURGE.KV_E2A_TASKS"}},
		{"serve", pub("serve"), []string{"$JS.API.CONSUMER.CREATE.KV_E2A_TASKS.*.$KV.E2A_TASKS.>", "$JS.API.CONSUMER.DELETE.KV_E2A_TASKS.*",
			"$JS.FC.KV_E2A_TASKS.*.*"}, []string{"$JS.API.CONSUMER.CREATE.KV_E2A_TASKS.>", "$JS.API.CONSUMER.CREATE.KV_E2A_TASKS.*"}},
		// The archiver reads E2A_AUDIT with ordered consumers (created,
		// pulled, deleted: ephemeral, any name) and writes E2A_ARCHIVE's
		// one subject; nothing of the pipeline's traffic, no stream
		// change, no consumer elsewhere. The auditors read the archive.
		{"archive", pub("archive"), []string{"e2a.archive.batches", "$JS.API.CONSUMER.CREATE.E2A_AUDIT.*", "$JS.API.CONSUMER.CREATE.E2A_AUDIT.*.e2a.audit.>",
			"$JS.API.CONSUMER.MSG.NEXT.E2A_AUDIT.*", "$JS.API.CONSUMER.INFO.E2A_AUDIT.*", "$JS.API.CONSUMER.DELETE.E2A_AUDIT.*",
			"$JS.API.DIRECT.GET.E2A_ARCHIVE.>", "$JS.API.STREAM.INFO.E2A_ARCHIVE", "$JS.API.STREAM.INFO.E2A_AUDIT"},
			[]string{"e2a.req.>", "e2a.resp.>", "e2a.ctl.>", "e2a.archive.>", "$JS.API.STREAM.CREATE.E2A_ARCHIVE", "$JS.API.STREAM.UPDATE.E2A_ARCHIVE",
				"$JS.API.STREAM.PURGE.E2A_ARCHIVE", "$JS.API.DIRECT.GET.E2A_AUDIT", "$JS.API.DIRECT.GET.E2A_REQUESTS"}},
		{"archive", sub("archive"), []string{"_INBOX.archive.>"}, []string{"e2a.live.>", "e2a.req.>", "_INBOX.>"}},
		{"audit", pub("audit"), []string{"$JS.API.DIRECT.GET.E2A_ARCHIVE", "$JS.API.DIRECT.GET.E2A_ARCHIVE.>", "$JS.API.STREAM.INFO.E2A_ARCHIVE"},
			[]string{"e2a.archive.batches"}},
	} {
		for _, w := range c.want {
			if !slices.Contains(c.list, w) {
				t.Errorf("%s lacks %q", c.user, w)
			}
		}
		for _, n := range c.not {
			if slices.Contains(c.list, n) {
				t.Errorf("%s has %q", c.user, n)
			}
		}
	}
	// Only the archive user (and admin, unrestricted) may publish on
	// E2A_ARCHIVE's subject or create, pull from or delete a consumer of
	// E2A_AUDIT; each stage may read the info of the E2A streams and
	// buckets its stage reads, of no other (stageInfoReads, run on real
	// servers by TestNATSUsersLeastPrivilege).
	for name, u := range users {
		if u.Permissions == nil {
			continue
		}
		var info []string
		for _, s := range e2aStreamsAndBuckets {
			if slices.Contains(u.Permissions.Publish.Allow, "$JS.API.STREAM.INFO."+s) {
				info = append(info, s)
			}
		}
		if want := stageInfoReads[name]; !slices.Equal(slices.Sorted(slices.Values(info)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s may read the info of %v, its stage reads %v", name, info, want)
		}
		if name == "archive" {
			continue
		}
		for _, s := range u.Permissions.Publish.Allow {
			for _, probe := range []string{"e2a.archive.batches", "$JS.API.CONSUMER.CREATE.E2A_AUDIT.x", "$JS.API.CONSUMER.MSG.NEXT.E2A_AUDIT.x",
				"$JS.API.CONSUMER.DELETE.E2A_AUDIT.x"} {
				if server.SubjectsCollide(s, probe) {
					t.Errorf("%s may publish %s (%q)", name, probe, s)
				}
			}
		}
	}
	// Each stage user may subscribe to its own inboxes (_INBOX.<user>.>,
	// where streams.ConnConfig puts them) and to no other client's: not to
	// nats.go's default inboxes (_INBOX.<random>), not to another user's.
	for name, u := range users {
		if u.Permissions == nil {
			continue
		}
		own := streams.InboxPrefixFor(name) + ".>"
		if !slices.Contains(u.Permissions.Subscribe.Allow, own) {
			t.Errorf("%s may not subscribe to its inboxes %s", name, own)
		}
		for _, s := range u.Permissions.Subscribe.Allow {
			probes := []string{"_INBOX.Hx3kY9vQ2pL8mN4rT6wZ1a.*", "_INBOX.Hx3kY9vQ2pL8mN4rT6wZ1a"}
			for other := range users {
				if other != name {
					probes = append(probes, streams.InboxPrefixFor(other)+".Hx3kY9vQ2pL8mN4rT6wZ1a")
				}
			}
			for _, probe := range probes {
				if server.SubjectsCollide(s, probe) {
					t.Errorf("%s may subscribe to %s (%q): another client's replies", name, probe, s)
				}
			}
		}
	}
	// serve is exactly ingress + egress + push.
	union := map[string]bool{}
	for _, s := range slices.Concat(pub("ingress"), pub("egress"), pub("push")) {
		union[s] = true
	}
	var want []string
	for s := range union {
		want = append(want, s)
	}
	sort.Strings(want)
	got := slices.Sorted(slices.Values(pub("serve")))
	if !slices.Equal(got, want) {
		t.Errorf("serve publish %v, want ingress ∪ egress ∪ push %v", got, want)
	}
}

// renderHelmMerge turns a Helm chart "merge" map into NATS configuration
// text by the chart's rules: strings "<< x >>" are written unquoted, keys
// ending in $include become include directives.
func renderHelmMerge(m map[string]any) string {
	var b strings.Builder
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	unquote := regexp.MustCompile(`"<<\s*(.*?)\s*>>"`)
	for _, k := range keys {
		if strings.HasSuffix(k, "$include") {
			fmt.Fprintf(&b, "include %s;\n", m[k])
			continue
		}
		var v strings.Builder
		enc := json.NewEncoder(&v)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(m[k])
		fmt.Fprintf(&b, "%q: %s\n", k, unquote.ReplaceAllString(strings.TrimSpace(v.String()), "$1"))
	}
	return b.String()
}

// checkNATSMemoryLimit checks that the NATS servers' GOMEMLIMIT (Go's
// syntax, 3GiB) leaves at least 10 % of the container's memory limit to
// what Go's limit does not cover (Go's GC guide: 5–10 % headroom), as
// e2a's containers do with E2A_MEMORY_LIMIT: at 100 % the collector runs
// hardest as the kernel OOM-kills the server.
func checkNATSMemoryLimit(t *testing.T, env, resources map[string]any) {
	t.Helper()
	soft, _ := env["GOMEMLIMIT"].(string)
	limits, _ := resources["limits"].(map[string]any)
	hard, _ := limits["memory"].(string)
	sq, err1 := resource.ParseQuantity(strings.TrimSuffix(soft, "B"))
	hq, err2 := resource.ParseQuantity(hard)
	if err1 != nil || err2 != nil || hq.IsZero() {
		t.Errorf("NATS container: GOMEMLIMIT %q, limits.memory %q: want both (%v, %v)", soft, hard, err1, err2)
		return
	}
	if float64(sq.Value()) > 0.9*float64(hq.Value()) {
		t.Errorf("NATS container: GOMEMLIMIT %s is over 90 %% of limits.memory %s: no headroom", soft, hard)
	}
}

// TestNATSHelmValues checks deploy/k8s/nats-values.yaml: a 3-node
// JetStream cluster on file storage, monitoring and the exporter on, and a
// "merge" that, rendered as the chart renders it next to the mounted
// accounts.conf, is a configuration the server accepts with fsync always
// and the E2A users.
func TestNATSHelmValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("k8s", "nats-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool     `json:"enabled"`
				Replicas int      `json:"replicas"`
				TLS      chartTLS `json:"tls"`
			} `json:"cluster"`
			NATS struct {
				TLS chartTLS `json:"tls"`
			} `json:"nats"`
			JetStream struct {
				Enabled   bool `json:"enabled"`
				FileStore struct {
					Enabled bool   `json:"enabled"`
					Dir     string `json:"dir"`
					PVC     struct {
						Enabled bool   `json:"enabled"`
						Size    string `json:"size"`
					} `json:"pvc"`
					MaxSize string `json:"maxSize"`
				} `json:"fileStore"`
				MemoryStore struct {
					Enabled bool `json:"enabled"`
				} `json:"memoryStore"`
				Merge map[string]any `json:"merge"`
			} `json:"jetstream"`
			Monitor struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
			} `json:"monitor"`
			Merge map[string]any `json:"merge"`
		} `json:"config"`
		TLSCA struct {
			Enabled    bool   `json:"enabled"`
			SecretName string `json:"secretName"`
			Key        string `json:"key"`
		} `json:"tlsCA"`
		Container struct {
			Image     chartImage       `json:"image"`
			Env       map[string]any   `json:"env"`
			Resources map[string]any   `json:"resources"`
			Merge     chartContainer   `json:"merge"`
			Patch     []map[string]any `json:"patch"`
		} `json:"container"`
		Reloader struct {
			Enabled bool           `json:"enabled"`
			Image   chartImage     `json:"image"`
			Merge   chartContainer `json:"merge"`
		} `json:"reloader"`
		PodTemplate struct {
			Merge struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"merge"`
			Patch                     []map[string]any `json:"patch"`
			TopologySpreadConstraints map[string]any   `json:"topologySpreadConstraints"`
		} `json:"podTemplate"`
		PodDisruptionBudget struct {
			Enabled bool `json:"enabled"`
		} `json:"podDisruptionBudget"`
		PromExporter struct {
			Enabled    bool           `json:"enabled"`
			Image      chartImage     `json:"image"`
			Merge      chartContainer `json:"merge"`
			PodMonitor struct {
				Enabled bool `json:"enabled"`
			} `json:"podMonitor"`
		} `json:"promExporter"`
		NatsBox struct {
			Enabled bool `json:"enabled"`
		} `json:"natsBox"`
	}
	if err := strictDecode(data, &v); err != nil {
		t.Fatal(err)
	}
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled ||
		!c.JetStream.FileStore.PVC.Enabled || c.JetStream.MemoryStore.Enabled || !c.Monitor.Enabled || c.Monitor.Port != 8222 ||
		!v.PromExporter.Enabled || !v.PodDisruptionBudget.Enabled {
		t.Errorf("values %+v", v)
	}
	for _, env := range natsUsers {
		if _, ok := v.Container.Env[env]; !ok {
			t.Errorf("container.env lacks %s", env)
		}
	}
	checkNATSMemoryLimit(t, v.Container.Env, v.Container.Resources)

	// Render the configuration the chart would write (server part reduced
	// to what the merges touch) beside the accounts file, and load it.
	dir := t.TempDir()
	confDir := filepath.Join(dir, "nats-config")
	accDir := filepath.Join(dir, "nats-e2a")
	for _, d := range []string{confDir, accDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := os.ReadFile(filepath.Join("nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(accDir, "accounts.conf"), acc, 0o644); err != nil {
		t.Fatal(err)
	}
	if mounts := fmt.Sprint(v.Container.Patch, v.PodTemplate.Patch); !strings.Contains(mounts, "/etc/nats-e2a") || !strings.Contains(mounts, "nats-e2a-accounts") {
		t.Errorf("accounts ConfigMap not mounted at /etc/nats-e2a: %s", mounts)
	}
	setNATSEnv(t)
	js := map[string]any{"store_dir": filepath.Join(dir, "data")}
	for k, x := range c.JetStream.Merge {
		js[k] = x
	}
	if c.JetStream.FileStore.MaxSize != "" { // the chart's config/jetstream.yaml
		js["max_file_store"] = "<< " + c.JetStream.FileStore.MaxSize + " >>"
	}
	jsConf := renderHelmMerge(js)
	// TLS as the chart's config/tls.yaml writes it (with this test's files
	// in place of the mounted secret).
	certs := newTestTLS(t)
	tlsBlock := func(tl chartTLS) string {
		if !tl.Enabled || tl.SecretName == "" {
			return ""
		}
		return fmt.Sprintf("tls {\ncert_file: %q\nkey_file: %q\nca_file: %q\n}\n", certs.Cert, certs.Key, certs.CA)
	}
	conf := "server_name: nats-0\njetstream {\n" + jsConf + "}\n" + renderHelmMerge(c.Merge) + tlsBlock(c.NATS.TLS) +
		"cluster {\nname: nats\nport: 6222\nroutes: [tls://nats-0.nats-headless:6222]\n" + tlsBlock(c.Cluster.TLS) + "}\n"
	path := filepath.Join(confDir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("rendered configuration:\n%s\n%v", conf, err)
	}
	if !opts.SyncAlways || opts.MaxPayload < 8<<20 || len(userPerms(t, opts)) != len(natsUsers) {
		t.Errorf("rendered configuration: sync always %v, max payload %d, %d users", opts.SyncAlways, opts.MaxPayload, len(opts.Users))
	}
	if opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil || !v.TLSCA.Enabled || v.TLSCA.SecretName != c.NATS.TLS.SecretName || v.TLSCA.Key != "ca.crt" {
		t.Errorf("TLS: clients %v, routes %v, CA %+v", opts.TLSConfig != nil, opts.Cluster.TLSConfig != nil, v.TLSCA)
	}
	pvc, err := resource.ParseQuantity(c.JetStream.FileStore.PVC.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkStoreFits(t, "nats-values.yaml", opts.JetStreamMaxStore, pvc.Value())

	// Images: the nats-server of go.mod; the others by exact tag.
	if want := strings.TrimPrefix(natsServerVersion(t), "v") + "-alpine"; v.Container.Image.Repository != "nats" || v.Container.Image.Tag != want {
		t.Errorf("NATS image %+v, want nats:%s (go.mod)", v.Container.Image, want)
	}
	for _, im := range []chartImage{v.Reloader.Image, v.PromExporter.Image} {
		if im.Repository == "" || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(im.Tag) {
			t.Errorf("image %+v not pinned to a version", im)
		}
	}

	// The StatefulSet's pod as the chart builds it (files/stateful-set:
	// containers nats, reloader, prom-exporter; config, pid, data, TLS and
	// accounts volumes; a shared process namespace) with the values'
	// merges, evaluated against the namespace's Pod Security level.
	spec := v.PodTemplate.Merge.Spec
	share := true
	spec.ShareProcessNamespace = &share
	spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nats-config"}}}},
		{Name: "pid", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "nats-js", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "nats-js-nats-0"}}},
		{Name: "tls-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.TLSCA.SecretName}}},
		{Name: "nats-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: c.NATS.TLS.SecretName}}},
		{Name: "e2a-accounts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nats-e2a-accounts"}}}},
	}
	for _, ct := range []struct {
		name  string
		image chartImage
		merge chartContainer
	}{{"nats", v.Container.Image, v.Container.Merge}, {"reloader", v.Reloader.Image, v.Reloader.Merge}, {"prom-exporter", v.PromExporter.Image, v.PromExporter.Merge}} {
		spec.Containers = append(spec.Containers, corev1.Container{Name: ct.name, Image: ct.image.Repository + ":" + ct.image.Tag, SecurityContext: ct.merge.SecurityContext})
	}
	if !v.Reloader.Enabled || !v.PromExporter.Enabled {
		t.Errorf("reloader %v, exporter %v", v.Reloader.Enabled, v.PromExporter.Enabled)
	}
	if viol := restrictedViolations(t, metav1.ObjectMeta{Name: "nats-0"}, &spec); len(viol) > 0 {
		t.Errorf("NATS pod refused by Pod Security restricted: %v", viol)
	}
	for _, ct := range spec.Containers {
		if sc := ct.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("NATS pod container %s: root filesystem writable", ct.Name)
		}
	}
}

// chartTLS, chartImage and chartContainer are parts of the NATS Helm
// chart's values.
type chartTLS struct {
	Enabled    bool   `json:"enabled"`
	SecretName string `json:"secretName"`
}

type chartImage struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
}

type chartContainer struct {
	SecurityContext *corev1.SecurityContext `json:"securityContext"`
}

// checkStoreFits checks that a server's max_file_store leaves at least
// 15 % of its volume free and holds the byte limits of every stream of
// deploy/k8s/config.yaml and of E2A_PUSH_DEAD, which `e2a streams apply`
// creates too with a fixed limit (JetStream reserves each stream's
// max_bytes on every server holding a replica).
func checkStoreFits(t *testing.T, where string, maxStore, volume int64) {
	t.Helper()
	env := configMapEnv(t)
	sum := int64(streams.PushDeadMaxBytes)
	bound := func(k string) int64 {
		n, err := strconv.ParseInt(env[k], 10, 64)
		if err != nil || n <= 0 {
			t.Errorf("k8s/config.yaml %s = %q: every stream and bucket must be bounded", k, env[k])
		}
		return n
	}
	for _, k := range []string{"E2A_REQUESTS_MAX_BYTES", "E2A_RESPONSES_MAX_BYTES", "E2A_CONTROL_MAX_BYTES", "E2A_AUDIT_MAX_BYTES",
		"E2A_ARCHIVE_MAX_BYTES", "E2A_INDEX_MAX_BYTES"} {
		sum += bound(k)
	}
	// Every key-value bucket a deployment's processes create.
	sum += int64(len(streams.Buckets)) * bound("E2A_KV_MAX_BYTES")
	if maxStore <= 0 || float64(maxStore) > 0.85*float64(volume) || sum > maxStore {
		t.Errorf("%s: max_file_store %d for a %d B volume; the streams' limits add up to %d", where, maxStore, volume, sum)
	}
}

// TestComposeFile checks deploy/compose against the NATS configuration:
// node names and routes, the users and their passwords' variables.
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Image       string            `json:"image"`
			Command     []string          `json:"command"`
			Hostname    string            `json:"hostname"`
			Environment map[string]string `json:"environment"`
			Volumes     []string          `json:"volumes"`
			ReadOnly    bool              `json:"read_only"`
			CapDrop     []string          `json:"cap_drop"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil { // anchors and merge keys
		t.Fatal(err)
	}
	env, err := os.ReadFile(filepath.Join("compose", "dev.env"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, l := range strings.Split(string(env), "\n") {
		if k, _, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(k, "#") {
			defined[k] = true
		}
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+)`).FindAllSubmatch(data, -1) {
		if !defined[string(m[1])] {
			t.Errorf("compose uses ${%s}, not in dev.env", m[1])
		}
	}
	conf, _ := os.ReadFile(natsConfigPath(t))
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("nats-%d", i)
		s, ok := f.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if s.Hostname != name || s.Environment["SERVER_NAME"] != name || s.Environment["E2A_NATS_STORE_DIR"] != "/data" ||
			!slices.Contains(s.Volumes, "../nats:/etc/nats:ro") || !slices.Equal(s.Command, []string{"--config", "/etc/nats/nats-server.conf"}) {
			t.Errorf("service %s: %+v", name, s)
		}
		if want := "nats:" + strings.TrimPrefix(natsServerVersion(t), "v"); s.Image != want {
			t.Errorf("service %s: image %q, want %q (go.mod)", name, s.Image, want)
		}
		if s.Environment["NATS_TLS_CERT"] == "" || s.Environment["NATS_TLS_KEY"] == "" || s.Environment["NATS_TLS_CA"] == "" || !slices.Contains(s.Volumes, "./tls:/etc/nats-tls:ro") {
			t.Errorf("service %s: no TLS files", name)
		}
		if !strings.Contains(string(conf), "nats-route://"+name+":6222") {
			t.Errorf("nats-server.conf has no route to %s", name)
		}
		for user, v := range natsUsers {
			if s.Environment[v] == "" {
				t.Errorf("service %s lacks the password of %s", name, user)
			}
		}
	}
	users := natsUsersFromAccounts(t)
	for name, s := range f.Services {
		if strings.HasPrefix(name, "nats-") || name == "tls" { // tls: TestComposeStartsWithOneCommand
			continue
		}
		u := s.Environment["E2A_NATS_USER"]
		if !users[u] || s.Environment["E2A_NATS_PASSWORD"] != "${"+natsUsers[u]+":?see dev.env}" {
			t.Errorf("service %s: user %q password %q", name, u, s.Environment["E2A_NATS_PASSWORD"])
		}
		if s.Image != "e2a-pipeline/e2a:"+imageTag(t) || s.Environment["E2A_NATS_TLS_CA"] == "" {
			t.Errorf("service %s: image %q, CA %q", name, s.Image, s.Environment["E2A_NATS_TLS_CA"])
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || s.Environment["E2A_REPLICAS"] != "3" {
			t.Errorf("service %s: read only %v, cap_drop %v, replicas %q", name, s.ReadOnly, s.CapDrop, s.Environment["E2A_REPLICAS"])
		}
	}
}

// TestNATSClusterPushUserRunsTheStage: the push user of
// deploy/nats/accounts.conf runs the push stage (push.Run) on a real
// nats-server: it binds its consumer of the frames and its consumer of
// parked configs' wake-ups (push-wake on KV_E2A_PUSH), writes a wake-up
// key, and pulls and acks it (a wake-up of a config that does not exist
// is done with at once), refused nothing, on three real nats-server
// processes.
func TestNATSClusterPushUserRunsTheStage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster")
	}
	c, ctx, _, adminJS := provisionedCluster(t, 180*time.Second, nil)
	cfg := streams.DefaultConfig()
	cfg.Replicas = 3
	// As `e2a streams apply` provisions them: the push user creates no
	// stream.
	if rep, err := streams.Apply(ctx, adminJS, cfg, streams.WithKeyValue(cfg.PushBucketConfig()),
		streams.WithStream(cfg.PushDeadStreamConfig())); err != nil {
		t.Fatalf("apply E2A_PUSH and E2A_PUSH_DEAD: %v\n%s", err, rep)
	}
	pushNC, sink := c.connect("push")
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	logs := &testkit.Buffer{}
	go func() {
		done <- push.Run(runCtx, pushNC, push.WithStreamsConfig(cfg), push.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	}()
	defer func() {
		if t.Failed() {
			t.Logf("the stage's log:\n%s\nerrors: %s", logs, sink)
		}
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("push.Run as push: %v", err)
		}
	}()
	var wake jetstream.Consumer
	testkit.Eventually(t, 20*time.Second, "the push stage's consumers", func() bool {
		select {
		case err := <-done:
			done <- err // for the deferred stop, which waits for it (it hung there for 10 min)
			t.Fatalf("push.Run as push: %v", err)
		default:
		}
		// Bounded: a consumer's info asked before its leader is elected
		// goes unanswered.
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		if _, err := adminJS.Consumer(rctx, streams.ResponsesStream, push.DefaultConsumer); err != nil {
			return false
		}
		w, err := adminJS.Consumer(rctx, "KV_"+streams.PushBucket, push.DefaultConsumer+"-wake")
		wake = w
		return err == nil
	})
	kv, err := jetstream.New(pushNC)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := kv.KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Put(ctx, "wake.cur.tYQ.tdA.tYw", []byte(`{"principal":"a","task_id":"t","config_id":"c"}`)); err != nil {
		t.Fatalf("push puts a wake-up: %v", err)
	}
	// A minute and a half: a pull the stage sent while the consumer's
	// leader was still being elected goes unanswered, and jetstream's
	// Consume sends the next only after two missed heartbeats (its pull
	// expires in 30 s, heartbeats every 15 s); 30 s fell short in CI on
	// aaf15dc, the cluster slow to settle (its streams applied again).
	testkit.Eventually(t, 90*time.Second, "the wake-up pulled and acked", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		ci, err := wake.Info(rctx)
		return err == nil && ci.Delivered.Consumer >= 1 && ci.NumAckPending == 0 && ci.AckFloor.Consumer >= 1
	})
	if s := sink.String(); strings.Contains(strings.ToLower(s), "permission") {
		t.Errorf("the push user was refused: %s", s)
	}
}

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"sigs.k8s.io/yaml"
)

// composeService is the part of a compose service these tests read;
// depends_on is either a list of names or a map of name → condition.
type composeService struct {
	Image           string   `json:"image"`
	Entrypoint      []string `json:"entrypoint"`
	Command         []string `json:"command"`
	Volumes         []string `json:"volumes"`
	DependsOn       any      `json:"depends_on"`
	Restart         string   `json:"restart"`
	StopSignal      string   `json:"stop_signal"`
	StopGracePeriod string   `json:"stop_grace_period"`
}

// loadCompose reads deploy/compose/compose.yaml (anchors and merge keys
// resolved).
func loadCompose(t *testing.T) map[string]composeService {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]composeService `json:"services"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Services
}

// dependsOn returns the condition s waits for on service name ("" when it
// does not depend on it; service_started for the list form).
func (s composeService) dependsOn(name string) string {
	switch d := s.DependsOn.(type) {
	case []any:
		if slices.Contains(d, any(name)) {
			return "service_started"
		}
	case map[string]any:
		if c, ok := d[name].(map[string]any); ok {
			cond, _ := c["condition"].(string)
			return cond
		}
	}
	return ""
}

// TestComposeStartsWithOneCommand: `docker compose ... up` alone starts
// the local cluster. Every host path a service bind-mounts is shipped in
// the repository, or is generated (deploy/compose/.gitignore) by a
// one-shot service the mounting service waits for
// (service_completed_successfully) that runs gen-certs.sh --if-missing on
// it. Before, the README needed deploy/tls/gen-certs.sh first, and an `up`
// without it made Docker create ./tls/ca.crt as a directory, which the
// script then could not write.
func TestComposeStartsWithOneCommand(t *testing.T) {
	services := loadCompose(t)
	ignore, err := os.ReadFile(filepath.Join("compose", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	var generated []string // paths relative to deploy/compose
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			generated = append(generated, strings.TrimSuffix(l, "/"))
		}
	}
	// producers: generated directory → the service writing it, from its
	// read-write mount and its command.
	producers := map[string]string{}
	for name, s := range services {
		cmd := strings.Join(append(slices.Clone(s.Entrypoint), s.Command...), " ")
		if !strings.Contains(cmd, "gen-certs.sh --if-missing") {
			continue
		}
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if !strings.HasSuffix(v, ":ro") && strings.Contains(cmd, "--if-missing "+dst) {
				producers[filepath.Clean(src)] = name
			}
		}
		if s.Restart != "" && s.Restart != "no" {
			t.Errorf("service %s: restart %q; a one-shot service runs once per up", name, s.Restart)
		}
		if want := "golang:" + dockerfileGoVersion(t) + "-bookworm"; s.Image != want {
			t.Errorf("service %s: image %q, want the Dockerfile's build stage %s (sh, openssl; pinned with it)", name, s.Image, want)
		}
	}
	for name, s := range services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") {
				continue // a named volume
			}
			rel := filepath.Clean(src)
			gen := ""
			for _, g := range generated {
				if rel == g || strings.HasPrefix(rel, g+"/") {
					gen = g
				}
			}
			if gen == "" {
				if _, err := os.Stat(filepath.Join("compose", rel)); err != nil {
					t.Errorf("service %s mounts %s, not in the repository: %v", name, src, err)
				}
				continue
			}
			p, ok := producers[gen]
			switch {
			case !ok:
				t.Errorf("service %s mounts %s, which no service of the compose file generates (run by hand before `up`)", name, src)
			case p != name && s.dependsOn(p) != "service_completed_successfully":
				t.Errorf("service %s mounts %s before %s wrote it: depends_on %s is %q, want service_completed_successfully", name, src, p, p, s.dependsOn(p))
			}
		}
	}
}

// dockerfileGoVersion is deploy/Dockerfile's GO_VERSION (TestDockerfile
// checks it against go.mod).
func dockerfileGoVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\nARG GO_VERSION=")
	if !ok {
		t.Fatal("Dockerfile: no ARG GO_VERSION")
	}
	v, _, _ := strings.Cut(rest, "\n")
	return v
}

// TestComposeNATSStopsInLameDuck: `docker compose stop nats-2` (the compose
// file's own failover demo) puts the server in lame duck mode, as the
// chart's preStop does on Kubernetes, and waits for it to end. SIGTERM,
// Docker's default, shuts nats-server down at once, and Docker's default
// 10 s would cut lame_duck_duration short.
func TestComposeNATSStopsInLameDuck(t *testing.T) {
	setNATSEnv(t)
	opts, err := server.ProcessConfigFile(natsConfigPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if opts.LameDuckDuration <= 0 {
		t.Fatalf("nats-server.conf: no lame_duck_duration")
	}
	for name, s := range loadCompose(t) {
		if !strings.HasPrefix(name, "nats-") {
			continue
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if s.StopSignal != "SIGUSR2" || err != nil || grace < opts.LameDuckDuration+10*time.Second {
			t.Errorf("service %s: stop_signal %q, stop_grace_period %q (%v); want SIGUSR2 and at least lame_duck_duration %v + 10s",
				name, s.StopSignal, s.StopGracePeriod, err, opts.LameDuckDuration)
		}
	}
}

// TestGenCertsScriptIfMissing: with --if-missing, gen-certs.sh writes the
// files into an empty directory and leaves a directory that holds them
// untouched (the compose cluster's tls service runs it at every `up`: new
// certificates would no longer match the CA the running servers trust).
func TestGenCertsScriptIfMissing(t *testing.T) {
	needOpenSSL(t)
	dir := filepath.Join(t.TempDir(), "tls")
	run := func() {
		t.Helper()
		if out, err := exec.Command("sh", filepath.Join("tls", "gen-certs.sh"), "--if-missing", dir).CombinedOutput(); err != nil {
			t.Fatalf("gen-certs.sh --if-missing: %v\n%s", err, out)
		}
	}
	run()
	before := map[string][]byte{}
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
		before[f] = b
	}
	run()
	for f, b := range before {
		if after, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(after) != string(b) {
			t.Errorf("%s rewritten by a second run (%v)", f, err)
		}
	}
}

package deploy

// The manifests' environment against what e2a reads and what the docs
// name.

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// cfgManifestVars returns the E2A_* variables the shipped manifests give
// e2a processes (k8s containers' env, the ConfigMaps, the compose e2a
// services; not the NATS servers'), each with where it is set.
func cfgManifestVars(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	m := loadManifests(t)
	for _, cm := range m.configMaps {
		for k := range cm.Data {
			out[k] = "ConfigMap " + cm.Name
		}
	}
	for _, d := range m.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				out[e.Name] = "Deployment " + d.Name
			}
		}
	}
	for _, j := range m.jobs {
		for _, c := range j.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				out[e.Name] = "Job " + j.Name
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]any `json:"environment"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	for name, s := range compose.Services {
		if strings.HasPrefix(name, "nats-") {
			continue // the NATS servers' (accounts.conf, nats-server.conf)
		}
		for k := range s.Environment {
			out[k] = "compose " + name
		}
	}
	for k := range out {
		if !strings.HasPrefix(k, "E2A_") {
			delete(out, k)
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d E2A_ variables found in the manifests: the parse is broken", len(out))
	}
	return out
}

// cfgReadVars returns the variables the module's Go code reads: envconfig
// tags and Env… constants of non-test files.
func cfgReadVars(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`envconfig:"(E2A_[A-Z0-9_]+)"|\w*Env\w*\s*=\s*"(E2A_[A-Z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]+m[2]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 80 {
		t.Fatalf("only %d variables read: the walk is broken", len(out))
	}
	return out
}

// TestManifestVariables: every E2A_* variable the manifests set is
// read by e2a (none is a silent no-op), and named in
// docs/configuration.md or the docs it points to. E2A_NATS_NAME (every k8s
// Deployment) and E2A_NATS_RECONNECT_WAIT (config.yaml, compose) were set
// but documented nowhere.
func TestManifestVariables(t *testing.T) {
	set := cfgManifestVars(t)
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	t.Run("read", func(t *testing.T) {
		read := cfgReadVars(t)
		for _, n := range names {
			if !read[n] {
				t.Errorf("%s (%s) is read by no e2a code", n, set[n])
			}
		}
	})
	t.Run("documented", func(t *testing.T) {
		var lines []string
		for _, p := range []string{"../docs/configuration.md", "../docs/push.md", "../docs/agents.md", "../workflow/doc.go", "../ingress/AUTH.md"} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, strings.Split(string(b), "\n")...)
		}
		for _, n := range names {
			if !cfgDocumented(lines, n) {
				t.Errorf("%s (%s) is set by the manifests but named in no doc", n, set[n])
			}
		}
	})
}

// cfgDocumented reports whether a doc line names the variable in full,
// or in the tables' shorthand (`E2A_UPSTREAM_KIND`, `_URL`: a line with a
// variable starting with the prefix, and "`_SUFFIX`").
func cfgDocumented(lines []string, name string) bool {
	full := regexp.MustCompile(`(^|[^A-Z0-9_])` + name + `([^A-Z0-9_*<]|$)`)
	for _, l := range lines {
		if full.MatchString(l) {
			return true
		}
	}
	for i := len("E2A_"); i < len(name); i++ {
		if name[i] != '_' {
			continue
		}
		prefix, suffix := "`"+name[:i+1], "`"+name[i:]+"`"
		for _, l := range lines {
			if strings.Contains(l, suffix) && strings.Contains(l, prefix) {
				return true
			}
		}
	}
	return false
}

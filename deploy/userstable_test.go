package deploy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

var updateUsersTable = flag.Bool("update", false, "rewrite the generated NATS users table of docs/operations.md")

// usersTablePath is the document holding the generated users table, and
// the markers around it.
const (
	usersTablePath  = "../docs/operations.md"
	usersTableBegin = "<!-- nats-users: generated from deploy/nats/accounts.conf by go test ./deploy/ -run TestNATSUsersTable -update -->"
	usersTableEnd   = "<!-- nats-users: end -->"
)

var (
	consumerAPI = regexp.MustCompile(`^\$JS\.API\.CONSUMER\.(CREATE|INFO|MSG\.NEXT|LIST|DELETE)\.([^.]+)(?:\.([^.]+))?`)
	ackSubject  = regexp.MustCompile(`^\$JS\.ACK\.(?:\*\.\*\.)?([^.]+)\.([^.]+)\.>$`)
)

// describePermissions sorts a user's subjects into the columns of the
// users table.
func describePermissions(u *server.User) []string {
	if u.Permissions == nil {
		if u.Account != nil && u.Account.Name == "SYS" {
			return []string{"system account", "", "", "", "", "", ""}
		}
		return []string{"everything in the account", "", "", "", "", "", ""}
	}
	set := func() map[string]bool { return map[string]bool{} }
	pub, info, other := set(), set(), set()
	// Buckets and streams with the keys or subjects allowed (">" when all).
	kv, direct := map[string]map[string]bool{}, map[string]map[string]bool{}
	addScoped := func(m map[string]map[string]bool, rest string) {
		name, filter, _ := strings.Cut(rest, ".")
		if filter == "" {
			filter = ">"
		}
		if m[name] == nil {
			m[name] = set()
		}
		m[name][filter] = true
	}
	consumers := map[string]map[string]bool{}
	addConsumer := func(name, op string) {
		if consumers[name] == nil {
			consumers[name] = set()
		}
		consumers[name][op] = true
	}
	for _, s := range u.Permissions.Publish.Allow {
		switch {
		case !strings.HasPrefix(s, "$"):
			pub["`"+s+"`"] = true
		case strings.HasPrefix(s, "$KV."):
			addScoped(kv, strings.TrimPrefix(s, "$KV."))
		case strings.HasPrefix(s, "$JS.API.DIRECT.GET."):
			addScoped(direct, strings.TrimPrefix(s, "$JS.API.DIRECT.GET."))
		case strings.HasPrefix(s, "$JS.API.STREAM.INFO."):
			info[strings.TrimPrefix(s, "$JS.API.STREAM.INFO.")] = true
		case consumerAPI.MatchString(s):
			m := consumerAPI.FindStringSubmatch(s)
			op := strings.ToLower(strings.ReplaceAll(m[1], "MSG.NEXT", "pull"))
			name := m[2] + "/" + m[3]
			if m[3] == "" {
				name = m[2] + "/*"
			} else if m[3] == "*" || m[3] == ">" {
				name = m[2] + "/*"
			}
			if op == "create" && !strings.HasPrefix(m[2], "E2A_") {
				other["`"+s+"`"] = true
				continue
			}
			addConsumer(name, op)
		case ackSubject.MatchString(s):
			m := ackSubject.FindStringSubmatch(s)
			addConsumer(m[1]+"/"+m[2], "ack")
		default:
			other["`"+s+"`"] = true
		}
	}
	join := func(m map[string]bool) string {
		return strings.Join(slices.Sorted(func(yield func(string) bool) { forKeys(m, yield) }), ", ")
	}
	// A name alone when everything in it is allowed, else the name and
	// the keys or subjects allowed: "E2A_BRIDGE (`c.*`, `pool.demo`)".
	joinScoped := func(m map[string]map[string]bool) string {
		names := set()
		for name, filters := range m {
			if filters[">"] {
				names[name] = true
				continue
			}
			var fs []string
			for _, f := range slices.Sorted(func(yield func(string) bool) { forKeys(filters, yield) }) {
				fs = append(fs, "`"+f+"`")
			}
			names[name+" ("+strings.Join(fs, ", ")+")"] = true
		}
		return join(names)
	}
	var cons []string
	for _, name := range slices.Sorted(func(yield func(string) bool) { forKeys(consumers, yield) }) {
		var ops []string
		for _, op := range []string{"create", "info", "pull", "ack", "list", "delete"} {
			if consumers[name][op] {
				ops = append(ops, op)
			}
		}
		cons = append(cons, name+" ("+strings.Join(ops, ", ")+")")
	}
	var subs []string
	for _, s := range u.Permissions.Subscribe.Allow {
		subs = append(subs, "`"+s+"`")
	}
	infoCol := join(info)
	if !slices.ContainsFunc(allE2AStreams, func(s string) bool { return !info[s] }) {
		for _, s := range allE2AStreams {
			delete(info, s)
		}
		infoCol = strings.Join(append([]string{"every E2A stream and bucket"}, slices.Sorted(func(yield func(string) bool) { forKeys(info, yield) })...), ", ")
	}
	return []string{join(pub), joinScoped(kv), joinScoped(direct), strings.Join(cons, "; "), infoCol, strings.Join(subs, ", "), join(other)}
}

// allE2AStreams are the streams and buckets whose info every stage reads
// at start-up (streams.Apply finds no drift).
var allE2AStreams = []string{"E2A_REQUESTS", "E2A_RESPONSES", "E2A_CONTROL", "E2A_AUDIT", "E2A_ARCHIVE", "KV_E2A_TASKS", "KV_E2A_RATELIMIT", "KV_E2A_INDEX"}

func forKeys[V any](m map[string]V, yield func(string) bool) {
	for k := range m {
		if !yield(k) {
			return
		}
	}
}

// usersTable renders the table of NATS users (docs/operations.md) from accounts.conf
// as the server parses it.
func usersTable(t *testing.T) string {
	t.Helper()
	setNATSEnv(t)
	opts, err := server.ProcessConfigFile(natsConfigPath(t))
	if err != nil {
		t.Fatal(err)
	}
	users := userPerms(t, opts)
	order := []string{"admin", "ingress", "egress", "serve", "push", "archive", "agent-demo", "agent-workflow", "agent-bridge", "audit", "sys"}
	if len(order) != len(users) {
		t.Fatalf("users %d, table order %v", len(users), order)
	}
	var b strings.Builder
	b.WriteString("| user | publishes | KV writes | direct gets | consumers (stream/name) | stream info | subscribes | also |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, name := range order {
		u := users[name]
		if u == nil {
			t.Fatalf("accounts.conf has no user %s", name)
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.Join(describePermissions(u), " | "))
	}
	return b.String()
}

// TestNATSUsersTable checks that the NATS users table of
// docs/operations.md is the one generated from deploy/nats/accounts.conf
// (-update rewrites it).
func TestNATSUsersTable(t *testing.T) {
	want := usersTable(t)
	path := filepath.FromSlash(usersTablePath)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, usersTableBegin), strings.Index(s, usersTableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q … %q around the NATS users table; it should be:\n%s", path, usersTableBegin, usersTableEnd, want)
	}
	got := s[i+len(usersTableBegin)+1 : j]
	if got == want {
		return
	}
	if *updateUsersTable {
		s = s[:i+len(usersTableBegin)+1] + want + s[j:]
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's NATS users table differs from accounts.conf (go test ./deploy/ -run TestNATSUsersTable -update); want:\n%s\ngot:\n%s", path, want, got)
}

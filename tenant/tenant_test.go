package tenant_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/e2a-pipeline/pipeline/tenant"
)

func TestAllows(t *testing.T) {
	alice := tenant.Principal{ID: "alice"}
	audit := tenant.Principal{ID: "ops", Roles: []tenant.Role{tenant.RoleAudit}}
	admin := tenant.Principal{ID: "root", Roles: []tenant.Role{tenant.RoleAdmin}}
	open := tenant.Principal{ID: "anonymous", Open: true}
	nobody := tenant.Principal{}
	cases := []struct {
		name  string
		p     tenant.Principal
		a     tenant.Access
		owner string
		want  bool
	}{
		{"owner reads", alice, tenant.Read, "alice", true},
		{"owner writes", alice, tenant.Write, "alice", true},
		{"other reads", alice, tenant.Read, "bob", false},
		{"other writes", alice, tenant.Write, "bob", false},
		{"prefix is not the owner", alice, tenant.Read, "alic", false},
		{"longer is not the owner", alice, tenant.Read, "alice ", false},
		{"case matters", alice, tenant.Read, "Alice", false},
		{"unknown owner", alice, tenant.Read, "", false},
		{"empty principal, empty owner", nobody, tenant.Read, "", false},
		{"audit reads anyone's", audit, tenant.Read, "bob", true},
		{"audit writes nobody's", audit, tenant.Write, "bob", false},
		{"audit writes its own", audit, tenant.Write, "ops", true},
		{"admin reads", admin, tenant.Read, "bob", true},
		{"admin writes", admin, tenant.Write, "bob", true},
		{"open reads", open, tenant.Read, "bob", true},
		{"open writes", open, tenant.Write, "", true},
	}
	for _, c := range cases {
		if got := c.p.Allows(c.a, c.owner); got != c.want {
			t.Errorf("%s: Allows(%d, %q) = %v, want %v", c.name, c.a, c.owner, got, c.want)
		}
	}
	for p, want := range map[*tenant.Principal]bool{&alice: false, &audit: true, &admin: true, &open: true, &nobody: false} {
		if p.SeesAll() != want {
			t.Errorf("%+v SeesAll = %v", *p, !want)
		}
	}
}

func TestParseRole(t *testing.T) {
	for _, s := range []string{"audit", "admin", " audit "} {
		if _, err := tenant.ParseRole(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "Audit", "root", "owner"} {
		if _, err := tenant.ParseRole(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestContext(t *testing.T) {
	if _, ok := tenant.FromContext(context.Background()); ok {
		t.Fatal("principal in an empty context")
	}
	p := tenant.Principal{ID: "alice", Roles: []tenant.Role{tenant.RoleAudit}}
	got, ok := tenant.FromContext(tenant.NewContext(context.Background(), p))
	if !ok || got.ID != "alice" || !got.HasRole(tenant.RoleAudit) {
		t.Fatalf("got %+v %v", got, ok)
	}
}

// A reader is checked against the owner of what it asks for; everyone but
// the owner (and the audit/admin roles) is told the item does not exist.
func ExamplePrincipal_Allows() {
	owner := "alice" // the user_id of the stored envelope
	for _, p := range []tenant.Principal{
		{ID: "alice"},
		{ID: "bob"},
		{ID: "ops", Roles: []tenant.Role{tenant.RoleAudit}},
	} {
		fmt.Printf("%s read=%v cancel=%v\n", p.ID, p.Allows(tenant.Read, owner), p.Allows(tenant.Write, owner))
	}
	// Output:
	// alice read=true cancel=true
	// bob read=false cancel=false
	// ops read=true cancel=false
}

package tenant

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/e2a-pipeline/pipeline/internal/ctxkey"
)

// Role grants a principal access beyond its own data. Roles are given in the
// auth configuration (see ingress/AUTH.md).
type Role string

const (
	// RoleAudit may read every principal's requests, tasks, sessions and
	// executions (not continue or cancel them).
	RoleAudit Role = "audit"
	// RoleAdmin may read, continue and cancel every principal's data.
	RoleAdmin Role = "admin"
)

// ParseRole returns the role named s ("audit" or "admin").
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.TrimSpace(s)); r {
	case RoleAudit, RoleAdmin:
		return r, nil
	}
	return "", fmt.Errorf("tenant: unknown role %q (want %q or %q)", s, RoleAudit, RoleAdmin)
}

// Access is what a caller wants to do with an item.
type Access uint8

const (
	// Read: get, stream, subscribe, list, replay.
	Read Access = iota + 1
	// Write: continue (a new turn of a task or session), cancel, or submit
	// an id that is already taken (a duplicate).
	Write
)

// Principal is an authenticated caller as the ownership rule sees it.
type Principal struct {
	// ID is the identity the caller's items are owned by: the user_id
	// ingress writes in the envelopes it accepts for this caller.
	ID string
	// Roles are the roles the auth configuration gives the caller.
	Roles []Role
	// Open is true when authentication is off (the none scheme alone):
	// every caller is the same anonymous principal, so there is nobody to
	// keep apart and every item is accessible.
	Open bool
}

// HasRole reports whether p has role r.
func (p Principal) HasRole(r Role) bool { return slices.Contains(p.Roles, r) }

// Allows is the ownership rule: whether p may have access a to an item owned
// by owner. owner is compared with p.ID byte for byte; an empty owner (an
// item whose owner is unknown, e.g. published on the subjects without a
// user_id) belongs to no authenticated principal.
func (p Principal) Allows(a Access, owner string) bool {
	switch {
	case p.Open:
		return true
	case p.ID != "" && owner == p.ID:
		return true
	case p.HasRole(RoleAdmin):
		return true
	case a == Read && p.HasRole(RoleAudit):
		return true
	}
	return false
}

// SeesAll reports whether p may read every principal's items (open auth,
// audit or admin), so that a listing need not be filtered.
func (p Principal) SeesAll() bool { return p.Open || p.HasRole(RoleAudit) || p.HasRole(RoleAdmin) }

var principalKey = ctxkey.New[Principal]("tenant principal")

// NewContext returns ctx carrying p, for handlers behind an authenticating
// front (the console, ingress) that call another stage's handler: the
// stage checks p instead of authenticating again.
func NewContext(ctx context.Context, p Principal) context.Context { return principalKey.With(ctx, p) }

// FromContext returns the principal stored by NewContext.
func FromContext(ctx context.Context) (Principal, bool) { return principalKey.From(ctx) }

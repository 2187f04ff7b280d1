package e2a_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestOwner: Owner is the ingress's conversation_owner detail when set,
// else user_id; SetOwner drops any value first and writes one only when it
// is another principal than user_id.
func TestOwner(t *testing.T) {
	env := &e2a.Envelope{UserID: "ops"}
	if got := env.Owner(); got != "ops" {
		t.Fatalf("no provenance: Owner %q, want ops", got)
	}
	env.SetOwner("alice")
	if got := env.Owner(); got != "alice" || env.Provenance.Details[e2a.DetailConversationOwner] != "alice" {
		t.Fatalf("SetOwner(alice): Owner %q, details %v", got, env.Provenance.Details)
	}
	for _, owner := range []string{"", "ops"} {
		env.Provenance.Details[e2a.DetailConversationOwner] = "bob" // a client's
		env.SetOwner(owner)
		if _, set := env.Provenance.Details[e2a.DetailConversationOwner]; set || env.Owner() != "ops" {
			t.Fatalf("SetOwner(%q) over a client's value: details %v, Owner %q", owner, env.Provenance.Details, env.Owner())
		}
	}
	env.Provenance.Details[e2a.DetailConversationOwner] = 42
	if got := env.Owner(); got != "ops" {
		t.Fatalf("a non-string owner: Owner %q, want ops", got)
	}
	b, err := e2a.MarshalEnvelope(&e2a.Envelope{UserID: "ops", Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2A,
		Details: map[string]any{e2a.DetailConversationOwner: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := e2a.FromJSON(b)
	if err != nil || back.Owner() != "alice" || back.UserID != "ops" {
		t.Fatalf("round trip: %v, Owner %q, user_id %q", err, back.Owner(), back.UserID)
	}
}

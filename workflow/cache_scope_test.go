package workflow

import (
	"context"
	"strings"
	"testing"
)

// TestDataCacheScopedByPrincipal: FilterData and TransformData entries
// were keyed by the type, the configuration and the input alone, so a
// second principal running the same operation on the same input got the
// first's value with cached:true, which tells one tenant what another ran
// within the minute. The principal is part of the key: another
// principal's run is computed afresh, the same principal's second run is
// served from the cache.
func TestDataCacheScopedByPrincipal(t *testing.T) {
	en := newEnv(t, nil)
	wf := strings.ReplaceAll(lines(
		op("get", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"points","operator":">","value":60}],"outputPath":"/workflow/f"}}`),
		op("t", `{"TransformData":{"inputPath":"/workflow/users","transform":"map","config":{"field":"name"},"outputPath":"/workflow/t"}}`),
		begin("get", "f", "t")), "https://api.example.com", en.api.URL)
	cached := func(principal, req string) map[string]bool {
		t.Helper()
		w, res := en.e.Validate(principal, wf)
		if !res.Valid {
			t.Fatalf("invalid workflow: %+v", res.Errors)
		}
		rec := &recorder{}
		out, err := en.e.Execute(context.Background(), principal, req, w, rec)
		if err != nil || out.Status != StatusSuccess {
			t.Fatalf("%s: %v %+v", principal, err, out.Error)
		}
		got := map[string]bool{}
		for _, ev := range rec.ends() {
			got[ev.OperationID] = ev.Cached
		}
		return got
	}
	if c := cached("agent-1", "r1"); c["f"] || c["t"] {
		t.Fatalf("agent-1's first run served from the cache: %v", c)
	}
	if c := cached("agent-2", "r2"); c["f"] || c["t"] {
		t.Errorf("agent-2's first run: FilterData cached=%v, TransformData cached=%v; agent-1's entries were served to agent-2", c["f"], c["t"])
	}
	if c := cached("agent-2", "r3"); !c["f"] || !c["t"] {
		t.Errorf("agent-2's second run: FilterData cached=%v, TransformData cached=%v; want both from its own entries", c["f"], c["t"])
	}
}

package workflow

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// nestedFanout builds levels Conditionals, each listing the next one n
// times in ifTrue and in ifFalse; the innermost lists a Wait n times.
func nestedFanout(levels, n int) string {
	rep := func(id string) string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("%q", id)
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	ls := []string{op("leaf", `{"Wait":{"duration":0}}`)}
	for l := levels - 1; l >= 0; l-- {
		next := "leaf"
		if l < levels-1 {
			next = fmt.Sprintf("c%d", l+1)
		}
		ls = append(ls, op(fmt.Sprintf("c%d", l), fmt.Sprintf(`{"Conditional":{"condition":{"path":"/workflow/x","operator":"==","value":1},"ifTrue":%s,"ifFalse":%s}}`, rep(next), rep(next))))
	}
	ls = append(ls, op("init", `{"ApiCall":{"method":"GET","url":"https://api.example.com/x","outputPath":"/workflow/x"}}`))
	return lines(append(ls, begin("init", "c0"))...)
}

// walkOf validates text as Validate does and returns the result and the
// operations the walk visited.
func walkOf(text string) (ValidationResult, int) {
	var rep report
	wf := parse(text, &rep)
	v := validator{wf: wf, rep: &rep, limits: DefaultLimits()}
	v.run()
	return rep.result(), v.visits
}

// TestValidateRepeatedIDsOnce: an operation listed again after itself in
// the same list is checked once: seven Conditionals each listing the next
// 8 times in both branches (a 2 KB workflow) took (2·8)^7 visits, hours of
// CPU on every /validate, /execute and worker envelope. (It would run
// 8^7 Waits, past MaxSteps: its one error says so, counted as fast.)
func TestValidateRepeatedIDsOnce(t *testing.T) {
	res, visits := walkOf(nestedFanout(7, 8))
	if len(res.Errors) != 1 || res.Errors[0].Field != "operationOrder" || res.Errors[0].Code != CodeLimit || visits > 2<<8 {
		t.Fatalf("%+v, %d visits: want only the step limit, at most %d visits", res.Errors, visits, 2<<8)
	}
}

// TestValidateWalkBudget: Conditionals listing distinct operations in both
// branches still expand exponentially (here 4^7 paths through 16
// operations); the walk stops at its budget with a limit error instead of
// running on.
func TestValidateWalkBudget(t *testing.T) {
	ls := []string{op("leafA", `{"Wait":{"duration":0}}`), op("leafB", `{"Wait":{"duration":0}}`)}
	const levels = 7
	for l := levels - 1; l >= 0; l-- {
		a, b := fmt.Sprintf("a%d", l+1), fmt.Sprintf("b%d", l+1)
		if l == levels-1 {
			a, b = "leafA", "leafB"
		}
		body := fmt.Sprintf(`{"Conditional":{"condition":{"path":"/workflow/x","operator":"==","value":1},"ifTrue":[%q,%q],"ifFalse":[%q,%q]}}`, a, b, a, b)
		ls = append(ls, op(fmt.Sprintf("a%d", l), body), op(fmt.Sprintf("b%d", l), body))
	}
	ls = append(ls, op("init", `{"ApiCall":{"method":"GET","url":"https://api.example.com/x","outputPath":"/workflow/x"}}`), begin("init", "a0"))
	res, visits := walkOf(lines(ls...))
	v := validator{limits: DefaultLimits()}
	if res.Valid || visits != v.maxWalk() || len(res.Errors) != 1 || res.Errors[0].Code != CodeLimit {
		t.Fatalf("valid %v, %d visits, errors %+v: want one limit error after %d visits", res.Valid, visits, res.Errors, v.maxWalk())
	}
}

// TestDataBytesBounded: a MergeData of the data model with itself, run
// again and again, doubled the data model at every step (a 300-byte
// workflow built gigabytes); the outputs of an execution are bounded by
// Limits.MaxDataBytes and the execution fails with a DataError.
func TestDataBytesBounded(t *testing.T) {
	order := make([]string, 40)
	for i := range order {
		order[i] = "d"
	}
	wf := lines(
		op("seed", `{"Wait":{"duration":0}}`),
		op("d", `{"MergeData":{"sources":["/workflow","/workflow"],"strategy":"concat","outputPath":"/workflow/a"}}`),
		begin(append([]string{"seed"}, order...)...),
	)
	e := New(Options{Cache: NoCache{}, Limits: Limits{MaxDataBytes: 1 << 20}})
	w, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "req-1", w, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFailed || out.Error == nil || out.Error.Type != DataError || !strings.Contains(out.Error.Message, "outputs exceed 1048576 bytes") {
		t.Fatalf("outcome %s %+v: want a DataError past MaxDataBytes", out.Status, out.Error)
	}
}

// TestDotSegmentsRefused: an API rule restricted to some paths cannot be
// left with a "." or ".." segment, plain or percent-encoded, in the url's
// text or from a reference (a server resolving them would serve
// /admin): static urls are invalid, referenced ones refused before the
// request; nothing reaches the server.
func TestDotSegmentsRefused(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/public/seg" {
			_, _ = w.Write([]byte(`{"seg":".."}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	p := &Policy{APIs: []APIRule{{ID: "public-only", Hosts: []string{"127.0.0.1"}, Paths: []string{"/public*"}}}}
	if err := p.compile(); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: p, Cache: NoCache{}})
	for _, u := range []string{"/public/../admin", "/public/%2e%2e/admin", "/public/%2E%2E/admin", "/public/./x", "/public/.%2E/admin"} {
		wf := lines(op("a", `{"ApiCall":{"method":"GET","url":"`+srv.URL+u+`","outputPath":"/workflow/a"}}`), begin("a"))
		if _, res := e.Validate("agent-1", wf); res.Valid || res.Errors[0].Code != CodePermission {
			t.Errorf("%s: valid %v %+v, want a permission error", u, res.Valid, res.Errors)
		}
	}
	// A reference resolving to "..": escaped as %2E%2E, refused before the
	// request all the same.
	wf := lines(
		op("v", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/public/seg","outputPath":"/workflow/s"}}`),
		op("a", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/public/{/workflow/s/seg}/admin","outputPath":"/workflow/a"}}`),
		begin("v", "a"))
	w, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "req-1", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFailed || out.Error == nil || out.Error.Type != PermissionError {
		t.Errorf("a referenced dot segment: outcome %s %+v, want a PermissionError", out.Status, out.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the server got %d calls, want 1 (the first operation's)", n)
	}
}

package habits

import (
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// sleepAllowed are the test functions whose time.Sleep is the behaviour
// under test, not a wait for something to happen, keyed
// "dir/file_test.go:Func" (Func the enclosing declaration: the function, or
// the method's name). Every other wait is on the event: a channel, a
// condition (internal/testkit.Eventually), or testing/synctest for timers.
var sleepAllowed = map[string]string{
	"agent/gopool_test.go:TestGoPoolIdleGoroutineEnds":                          "inside a testing/synctest bubble: the sleep advances the fake clock (a kept goroutine's idle timer)",
	"agent/gopool_test.go:TestGoPoolKeepsItsGoroutine":                          "inside a testing/synctest bubble: the sleep advances the fake clock (idle, within the timer)",
	"agent/lifecycle_test.go:TestShutdownDrainsInFlight":                        "a handler still running when shutdown begins",
	"agent/sharing_test.go:TestInProgressKeepsLongHandler":                      "a handler running 2.5× the AckWait",
	"agent/sharing_test.go:TestWorkSharingBoundedByConcurrencyAndMaxAckPending": "turns long enough to overlap, so the peak in flight shows the bounds",
	"agent/writer_test.go:TestCoalescing":                                       "chunks spread over time, for the coalescing linger",
	"bridge/client_test.go:TestIdleBodyTimer":                                   "inside a testing/synctest bubble: the sleep advances the fake clock",
	"bridge/idlewatch_test.go:TestIdleWatch":                                    "inside a testing/synctest bubble: the sleep advances the fake clock (a request sent late, a stopped watch)",
	"cmd/e2a/serveuntil_test.go:TestServeUntilWaitsForEveryAgent":               "inside a testing/synctest bubble: the sleep advances the fake clock (an agent draining)",
	"deploy/cluster_e2e_test.go:readSSE":                                        "a reconnecting SSE client's delay between attempts, as an EventSource's retry",
	"egress/cluster_test.go:TestReplayCluster":                                  "readers join at random points of a paced write",
	"egress/waittimers_internal_test.go:TestPooledTimerNoStaleFire":             "inside a testing/synctest bubble: the sleep advances the fake clock (a pooled timer fired unread)",
	"egress/console/stats_internal_test.go:TestStatsReading":                    "inside a testing/synctest bubble: the sleep advances the fake clock (rates over 2 s)",
	"egress/replay_test.go:TestReplaySeam":                                      "readers join at random points of a paced write",
	"egress/replay_test.go:TestReplaySlowReaderBoundedBuffer":                   "a reader slower than the writer",
	"internal/audit/replay_test.go:TestReplayScan":                              "a time query needs stored timestamps on both sides of its bound",
	"internal/securitytest/security_test.go:slowCases":                          "a client that reads nothing for longer than the write timeout",
	"push/replicas_once_test.go:TestTwoReplicasPostEachUpdateOnce":              "a slow webhook, so that a replica's POST is in flight when the other parks its config",
	"workflow/api_test.go:Submit":                                               "a fake pool that answers late",
}

// sleepPending are sleeps that still wait for something and are not yet
// replaced by a wait on the event (issue 39). It is empty: keep it so.
var sleepPending = map[string]string{}

// TestNoSleepInTests fails for a test file that calls (or takes) time.Sleep
// in a function neither list names, and for a listed function that no
// longer does (take it off its list).
func TestNoSleepInTests(t *testing.T) {
	root := moduleRoot(t)
	found, files := sleepsIn(t, root)
	if files < 100 {
		t.Fatalf("read only %d test files under %s: the walk is broken", files, root)
	}
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := sleepAllowed[k]; ok {
			continue
		}
		if _, ok := sleepPending[k]; ok {
			continue
		}
		t.Errorf("%s: time.Sleep in %s: wait on the event instead (a channel, testkit.Eventually, testing/synctest); "+
			"if the sleep is the behaviour under test, add it to sleepAllowed with the reason", found[k], k)
	}
	for _, list := range []map[string]string{sleepAllowed, sleepPending} {
		for k := range list {
			if _, ok := found[k]; !ok {
				t.Errorf("%s is listed but calls time.Sleep no more: take it off the list", k)
			}
		}
	}
	t.Logf("%d test functions sleep: %d as the behaviour, %d pending", len(found), len(sleepAllowed), len(sleepPending))
}

// sleepsIn returns the position of the first time.Sleep of every test
// function of the module that uses it, keyed as sleepAllowed is, and how
// many test files it read (no node_modules, testdata, vendor or hidden
// directories, no nested module).
func sleepsIn(t *testing.T, root string) (map[string]string, int) {
	t.Helper()
	found := map[string]string{}
	files := 0
	isTest := func(name string) bool { return strings.HasSuffix(name, "_test.go") }
	eachGoFile(t, root, parser.SkipObjectResolution, isTest, func(fset *token.FileSet, rel string, file *ast.File) {
		files++
		for fn, pos := range fileSleeps(file) {
			key := rel + ":" + fn
			if _, ok := found[key]; !ok {
				found[key] = fset.Position(pos).String()
			}
		}
	})
	return found, files
}

// fileSleeps returns, for each declaration of file that uses time.Sleep
// (under whatever name file imports "time"), the position of its first use.
// A use outside any function is keyed "(file scope)".
func fileSleeps(file *ast.File) map[string]token.Pos {
	timeName := ""
	for _, im := range file.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "time" {
			timeName = "time"
			if im.Name != nil {
				timeName = im.Name.Name
			}
		}
	}
	out := map[string]token.Pos{}
	if timeName == "" || timeName == "_" {
		return out
	}
	for _, decl := range file.Decls {
		key := "(file scope)"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			key = fd.Name.Name
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Sleep" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName {
				if _, seen := out[key]; !seen {
					out[key] = sel.Pos()
				}
			}
			return true
		})
	}
	return out
}

// TestFileSleeps checks the finder: a call, a use as a value and an
// aliased import are found, each under its declaration; another package's
// Sleep is not.
func TestFileSleeps(t *testing.T) {
	src := `package x
import (
	tm "time"
	other "example.com/clock"
)
var nap = tm.Sleep
func A() { go func() { tm.Sleep(1) }() }
func (r) B() { other.Sleep(1) }
`
	file, err := parser.ParseFile(token.NewFileSet(), "x_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := fileSleeps(file)
	if _, ok := got["A"]; !ok || len(got) != 2 {
		t.Fatalf("found %v, want A and (file scope)", got)
	}
	if _, ok := got["(file scope)"]; !ok {
		t.Fatalf("found %v, want the use as a value", got)
	}
}

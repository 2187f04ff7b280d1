package conformance

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/render"
)

// lineRenderer is the smallest renderer the suite can hold: a frame's
// sequence a line (SSE: a data event), an error at the end. Its faults
// break one of the suite's invariants each.
type lineRenderer struct {
	o   *render.Output
	sse bool
	// noHeaders: an SSE renderer that sets no event-stream headers; plain:
	// one that writes bare lines; silent: one that writes nothing; mark:
	// output that differs from the golden files of the sound renderer.
	noHeaders, plain, silent, mark bool
}

func (r *lineRenderer) Start() error {
	if r.sse && !r.noHeaders {
		for h, v := range sseHeaders {
			r.o.Header().Set(h, v)
		}
	}
	r.o.WriteHeader(200)
	return nil
}

func (r *lineRenderer) line(s string) error {
	switch {
	case r.silent:
		return nil
	case r.mark:
		s = "1" + s
	}
	if r.sse && !r.plain {
		s = "data: " + s + "\n"
	}
	_, err := r.o.WriteString(s + "\n")
	return err
}

func (r *lineRenderer) Frame(f *render.Frame) error {
	return r.line(strconv.FormatInt(f.Sequence(), 10))
}
func (r *lineRenderer) Heartbeat() error { return nil }

func (r *lineRenderer) End(err error) error {
	if err != nil {
		return r.line(strconv.Quote(err.Error()))
	}
	return nil
}

var _ render.Renderer = (*lineRenderer)(nil)

// brokenEnv names, in a child process of TestRenderersFailBroken, the
// fault its renderer has; goldenEnv the golden files' directory.
const (
	brokenEnv = "E2A_CONFORMANCE_BROKEN"
	goldenEnv = "E2A_CONFORMANCE_GOLDEN"
)

// lineCase is the suite's case for a lineRenderer with the fault named
// (none: "").
func lineCase(dir, fault string) Case {
	return Case{Name: "line", Dir: dir, SSE: true, New: func(o *render.Output, _ Scenario) render.Renderer {
		return &lineRenderer{o: o, sse: true, noHeaders: fault == "headers", plain: fault == "sse", silent: fault == "empty",
			mark: fault == "golden"}
	}}
}

// TestRenderersFailBroken holds the suite to its word: a sound renderer
// passes it (its golden files written, then matched), and a renderer
// that breaks one invariant (output unlike its golden files, nothing
// written, no event-stream headers, a body that is not SSE) fails it, each
// with its own message. The failing runs are child processes of this test
// binary, since a failing subtest fails its parent.
func TestRenderersFailBroken(t *testing.T) {
	if fault := os.Getenv(brokenEnv); fault != "" {
		TestRenderers(t, false, lineCase(os.Getenv(goldenEnv), fault))
		return
	}
	dir := t.TempDir()
	TestRenderers(t, true, lineCase(dir, ""))
	TestRenderers(t, false, lineCase(dir, ""))
	for fault, want := range map[string]string{
		"golden":  "output differs from",
		"empty":   "nothing written",
		"headers": `Content-Type = "", want "text/event-stream"`,
		"sse":     "bad SSE line",
	} {
		t.Run(fault, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRenderersFailBroken$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+fault, goldenEnv+"="+dir)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("the suite on a renderer with fault %q: %v, want a failure saying %q:\n%.2000s", fault, err, want, out)
			}
		})
	}
}

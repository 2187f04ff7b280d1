package protocols_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/testdata/echo"
	"github.com/e2a-pipeline/pipeline/render"
)

var update = flag.Bool("update", false, "rewrite the golden files of the added protocol (testdata/echo/testdata/)")

// TestAddedProtocol: adding a protocol is its package
// (protocols/testdata/echo), one registry line and its golden files, no
// other file touched. Registered beside the pipeline's protocols, echo is
// served by ingress's mount loop (POST /echo, 405 for GET), its requests
// normalized by its own adapter into envelopes an agent pool gets, its
// answer rendered from the frames by its renderer, and the renderer
// checked through every conformance scenario against its golden files.
func TestAddedProtocol(t *testing.T) {
	reg, err := protocols.New(append(protocols.All(), echo.Protocol)...)
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithProtocols(reg)))
	got := make(chan *e2a.Envelope, 1)
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		got <- env
		text, _ := env.Params["text"].(string)
		for _, word := range strings.Fields(text) {
			if err := w.Chunk(e2a.DeltaText, word+" "); err != nil {
				return err
			}
		}
		return w.Complete(map[string]any{"echoed": text})
	}))

	lines := postEcho(t, p.URL+echo.Path, `{"text":"adding a protocol"}`, http.StatusOK)
	var text strings.Builder
	for _, l := range lines[:len(lines)-1] {
		text.WriteString(l.Text)
	}
	if last := lines[len(lines)-1]; text.String() != "adding a protocol " || !last.Done || last.Status != e2a.StatusSucceeded {
		t.Errorf("answer %q, last line %+v", text.String(), last)
	}
	env := <-got
	if env.Method != "echo" || env.Params["text"] != "adding a protocol" || env.RequestID == "" || env.Channel == "" {
		t.Errorf("normalized envelope %+v", env)
	}
	if l := postEcho(t, p.URL+echo.Path, `{"text":""}`, http.StatusBadRequest); l[0].Error == "" {
		t.Errorf("empty text: %+v", l)
	}
	resp, err := http.Get(p.URL + echo.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET %s: %d", echo.Path, resp.StatusCode)
	}

	conformance.TestRenderers(t, *update, conformance.Case{Name: echo.Format, Dir: filepath.Join("testdata", "echo", "testdata"),
		New: func(o *render.Output, _ conformance.Scenario) render.Renderer { return echo.NewRenderer(o) }})
}

// postEcho posts body to url and returns the answer's lines (an error
// body is one line), checking the status.
func postEcho(t *testing.T, url, body string, status int) []echo.Line {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("POST %s: %d, want %d", url, resp.StatusCode, status)
	}
	var out []echo.Line
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l echo.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		t.Fatal("no answer")
	}
	return out
}

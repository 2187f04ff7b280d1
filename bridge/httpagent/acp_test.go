package httpagent_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/proctest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// openACP opens an ACP session of acp-go-sdk's client over stdio with p
// (its default pool) and returns a prompt function: the stop reason and
// the agent's message text of each prompt.
func openACP(t *testing.T, p *pipetest.Pipeline) func(text string) (acp.StopReason, string) {
	t.Helper()
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})
	return func(text string) (acp.StopReason, string) { t.Helper(); return s.Prompt(t, text) }
}

// TestACPInterruptAnswerCarriesHistory: an HTTP agent asks
// "Which city?" in an ACP session: the prompt ends end_turn with the
// question; the session's next prompt is the answer, whose POST carries
// the session's earlier turn (the user's message and the question).
func TestACPInterruptAnswerCarriesHistory(t *testing.T) {
	srv := newRecorder(t, func(n int) string {
		if n == 1 {
			return `{"response_kind":"a2a.stream_event","status":"succeeded","is_final":true,"body":` +
				string(e2a.MarshalBody(e2a.InterruptBody(e2a.StateInputRequired, "Which city?"))) + "}\n"
		}
		return `{"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"Sunny."}}` + "\n" +
			`{"response_kind":"e2a.complete","body":{"result":{"text":"Sunny."}}}` + "\n"
	})
	r := newRig(t, srv.URL, rigConfig{})
	prompt := openACP(t, r.p)
	if stop, said := prompt("the weather"); stop != acp.StopReasonEndTurn || said != "Which city?" {
		t.Fatalf("the question: %s %q", stop, said)
	}
	if stop, said := prompt("Paris"); stop != acp.StopReasonEndTurn || said != "Sunny." {
		t.Fatalf("the answer: %s %q", stop, said)
	}
	bodies := srv.Bodies()
	if len(bodies) != 2 {
		t.Fatalf("%d POSTs, want 2", len(bodies))
	}
	if second := string(bodies[1]); !strings.Contains(second, "the weather") || !strings.Contains(second, "Which city?") {
		t.Errorf("the answer's POST lacks the session's earlier turn: %s", second)
	}
}

// TestExampleNDJSONAndACP: the Node example (examples/httpagent)
// answered from E2A NDJSON and from ACP (acp-go-sdk), two turns of one
// session.
func TestExampleNDJSONAndACP(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("js")))
	bridgePool(t, p, "js", startExample(t, proctest.Node(t), "agent.mjs"))
	resp, body := testkit.Do(t, http.MethodPost, p.URL+"/v1/requests", `{"request_id":"rv-nd","params":{"text":"hello there"}}`,
		"Content-Type", "application/json", "Accept", "application/x-ndjson")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("NDJSON: %d %s", resp.StatusCode, body)
	}
	var frames []*e2a.Response
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		f, err := e2a.ResponseFromJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("line %s: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	a := pipetest.Answer{Frames: frames}
	if want := "Node heard: hello there "; a.Text(e2a.DeltaText) != want {
		t.Errorf("NDJSON text %q, want %q", a.Text(e2a.DeltaText), want)
	}
	if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
		t.Errorf("NDJSON final frame %+v", f)
	}
	prompt := openACP(t, p)
	for _, text := range []string{"hi acp", "again"} {
		if stop, said := prompt(text); stop != acp.StopReasonEndTurn || !strings.Contains(said, "Node heard: "+text) {
			t.Errorf("ACP %q: %s %q", text, stop, said)
		}
	}
}

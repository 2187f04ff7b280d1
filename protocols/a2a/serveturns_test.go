package a2a

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// fakeServe serves the frames of turns as egress's ServeExisting does:
// from the resume point of r, and a turn whose final frame is before it
// answered 204 when noContent (the History's answer) or with the stream
// opened and nothing in it (the hot streams').
func fakeServe(t *testing.T, turns map[string][]*e2a.Response, noContent bool) func(http.ResponseWriter, *http.Request, string, string, render.NewRenderer) {
	return func(w http.ResponseWriter, r *http.Request, id, _ string, nr render.NewRenderer) {
		o := render.NewOutput(w, 0)
		rend := nr(o)
		from, err := egress.ResumePoint(r)
		if err != nil {
			t.Fatalf("turn %s: %v", id, err)
		}
		frames := turns[id]
		if from > frames[len(frames)-1].Sequence && noContent {
			o.WriteHeader(http.StatusNoContent)
			_ = rend.End(nil)
			return
		}
		if err := rend.Start(); err != nil {
			t.Fatal(err)
		}
		renderFramesFrom(t, rend, frames, from)
		_ = rend.End(nil)
	}
}

// renderFramesFrom renders frames from sequence from with rend, each
// as egress reads it from the stream (stream sequence: its index + 1).
func renderFramesFrom(t *testing.T, rend render.Renderer, frames []*e2a.Response, from int64) {
	t.Helper()
	for i, f := range frames {
		if f.Sequence < from {
			continue
		}
		raw, _ := json.Marshal(f)
		hf, err := render.HeadFrame(raw, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if err := rend.Frame(hf); err != nil {
			t.Fatal(err)
		}
	}
}

func turnFrames(id, text string) []*e2a.Response {
	return []*e2a.Response{
		conformance.Chunk(id, 0, e2a.DeltaText, text, ""),
		conformance.Frame(id, 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: text}, nil),
	}
}

// TestServeTurnsIDs: a stream of several turns (serveTurns) names each
// event's turn in its id ("<requestID>:<seq>"), opens once, and writes
// final:true once, last; resumed with the id of the first turn's last
// event (its final frame: the turn has nothing more), it goes on with
// the next turn, whether egress answers that turn 204 (the History) or an
// empty stream (the hot streams), the head written once.
func TestServeTurnsIDs(t *testing.T) {
	turns := map[string][]*e2a.Response{"req-a": turnFrames("req-a", "one"), "req-b": turnFrames("req-b", "two")}
	p := a2amap.Params{JSONRPCID: json.RawMessage(`7`), TaskID: "task-1", ContextID: "ctx-1", Resubscribe: true}
	for _, c := range []struct {
		name, lastID string
		noContent    bool
		ids          string
		one          bool
	}{
		{"from the start", "", false, "req-a:0 req-a:1 req-b:0 req-b:1", true},
		{"after the first turn's chunk", "req-a:0", false, "req-a:1 req-b:0 req-b:1", true}, // its result
		{"after the first turn's end, hot", "req-a:1", false, "req-b:0 req-b:1", false},
		{"after the first turn's end, history", "req-a:1", true, "req-b:0 req-b:1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/a2a", nil)
			if c.lastID != "" {
				if _, _, ok := turnResumePoint(r); ok {
					t.Fatal("a request without a resume point names a turn")
				}
				r.Header.Set("Last-Event-ID", c.lastID)
				turn, from, ok := turnResumePoint(r)
				if !ok || turn != "req-a" {
					t.Fatalf("turnResumePoint(%q) = %q, %d, %t", c.lastID, turn, from, ok)
				}
				r = withResumePoint(r, from)
			}
			w := httptest.NewRecorder()
			serveTurns(fakeServe(t, turns, c.noContent), w, r, []string{"req-a", "req-b"}, p, nil)
			body := w.Body.String()
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" || strings.Count(body, ": ok\n") != 1 {
				t.Fatalf("status %d, content type %q, want one SSE head:\n%s", w.Code, w.Header().Get("Content-Type"), body)
			}
			var ids []string
			for _, l := range strings.Split(body, "\n") {
				if id, ok := strings.CutPrefix(l, "id: "); ok {
					ids = append(ids, id)
				}
			}
			if got := strings.Join(ids, " "); got != c.ids {
				t.Fatalf("ids %q, want %q:\n%s", got, c.ids, body)
			}
			if strings.Count(body, `"final":true`) != 1 || strings.Contains(body, `"text":"one"`) != c.one ||
				!strings.Contains(body, `"text":"two"`) {
				t.Fatalf("want final:true once, turn two's text:\n%s", body)
			}
		})
	}
}

// TestTurnResumePoint: a resume point naming a turn is its event id,
// "<requestID>:<seq>" (the request id may hold colons), in Last-Event-ID
// (after seq) or ?from= (from seq); a plain sequence or anything else
// names none.
func TestTurnResumePoint(t *testing.T) {
	for _, c := range []struct {
		header, query string
		turn          string
		from          int64
		ok            bool
	}{
		{"req-a:3", "", "req-a", 4, true},
		{"req:a:b:0", "", "req:a:b", 1, true},
		{"req-a:-1", "", "req-a", 0, true},
		{"", "from=req-a:3", "req-a", 3, true},
		{"req-a:2", "from=req-b:9", "req-a", 3, true},
		{"3", "", "", 0, false},
		{"", "from=3", "", 0, false},
		{":3", "", "", 0, false},
		{"req-a:", "", "", 0, false},
		{"req-a:x", "", "", 0, false},
		{"", "from=req-a:-1", "", 0, false},
	} {
		r := httptest.NewRequest("POST", "/a2a?"+c.query, nil)
		if c.header != "" {
			r.Header.Set("Last-Event-ID", c.header)
		}
		turn, from, ok := turnResumePoint(r)
		if ok != c.ok || ok && (turn != c.turn || from != c.from) {
			t.Errorf("Last-Event-ID %q, %q: %q, %d, %t; want %q, %d, %t", c.header, c.query, turn, from, ok, c.turn, c.from, c.ok)
		}
	}
}

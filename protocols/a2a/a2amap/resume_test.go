package a2amap_test

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// scenarioFrames are the frames of the conformance scenario name.
func scenarioFrames(t *testing.T, name string) []*e2a.Response {
	t.Helper()
	for _, sc := range conformance.Scenarios() {
		if sc.Name == name {
			return sc.Frames
		}
	}
	t.Fatalf("no conformance scenario %q", name)
	return nil
}

// TestResumedStreamAppendsToWhatTheClientHas: a stream resumed at from,
// its mapper given the frames before from (render.Primer, as egress gives
// a resumed A2A stream), knows which artifacts the client has: the first
// update of an artifact that starts after the resume point starts it
// (append false: A2A appends only to an artifact sent before, and a2a-go's
// task manager refuses an append to one it does not have), and one the
// client has, or whose first parts it was not shown (a basic client's
// thought), is appended to or started as the unresumed stream did. A
// mapper not given every frame before from (they aged out) still appends
// (it cannot tell). It appended to every artifact of a resumed stream.
func TestResumedStreamAppendsToWhatTheClientHas(t *testing.T) {
	for _, c := range []struct {
		name     string
		scenario string
		p        a2amap.Params
		from     int64
		prime    bool
		want     []bool // the append flag of each artifact-update from `from`
	}{
		{"tool call, new artifact after resume", "trpc_tool_call", a2amap.Params{Interaction: true}, 3, true, []bool{false, true}},
		{"tool call, mid artifact", "trpc_tool_call", a2amap.Params{Interaction: true}, 4, true, []bool{true}},
		{"tool call, basic client", "trpc_tool_call", a2amap.Params{}, 3, true, []bool{false, true}},
		{"reasoning hidden from a basic client", "reasoning_then_text", a2amap.Params{}, 1, true, []bool{false, true}},
		{"reasoning shown", "reasoning_then_text", a2amap.Params{Interaction: true}, 1, true, []bool{true, true}},
		{"basic client mid text", "reasoning_then_text", a2amap.Params{}, 2, true, []bool{true}},
		{"frames before the resume point aged out", "trpc_tool_call", a2amap.Params{Interaction: true}, 3, false, []bool{true, true}},
	} {
		frames := scenarioFrames(t, c.scenario)
		p := c.p
		p.TaskID, p.ContextID = "task-1", "ctx-1"
		m := a2amap.NewStreamMapper(frames[0].RequestID, p, c.from)
		if c.prime {
			for _, f := range frames[:c.from] {
				if _, err := m.Events(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		var got []bool
		for _, f := range frames[c.from:] {
			evs, err := m.Events(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
					got = append(got, au.Append)
				}
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: append flags %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: append flags %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

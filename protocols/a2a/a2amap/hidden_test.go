package a2amap_test

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// TestCodeExecutionHiddenFromBasicClient: the interaction spec's code
// execution parts (executable_code, code_execution_result: its "Event Types
// and A2A Mapping", execution trace outside A2A's scope) reach only a
// client that declared the spec, as its thoughts and tool calls do; a
// basic client gets the answer's text. They reached every client.
func TestCodeExecutionHiddenFromBasicClient(t *testing.T) {
	frames := scenarioFrames(t, "code_execution")
	for _, c := range []struct {
		p    a2amap.Params
		want []string // the part types the client gets, in order
	}{
		{a2amap.Params{Interaction: true}, []string{"executable_code", "code_execution_result", "text"}},
		{a2amap.Params{}, []string{"text"}},
	} {
		hidden := a2amap.HiddenPart(c.p)
		m := a2amap.NewStreamMapper(frames[0].RequestID, c.p, 0)
		var got []string
		for _, f := range frames {
			evs, err := m.Events(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				au, ok := ev.(*a2a.TaskArtifactUpdateEvent)
				if !ok {
					continue
				}
				for _, pt := range au.Artifact.Parts {
					if hidden != nil && hidden(pt) {
						continue
					}
					typ, _ := pt.Metadata[a2amap.MetaPartType].(string)
					if typ == "" {
						typ = "text"
					}
					got = append(got, typ)
				}
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("interaction %v: the client gets parts %v, want %v", c.p.Interaction, got, c.want)
		}
	}
}

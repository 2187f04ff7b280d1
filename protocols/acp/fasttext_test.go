package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestACPFastTextMatches: TextUpdate writes what json.Marshal writes of
// the session/update notification of the frame's ACPUpdates (the general
// path of protocols/acp's renderer), for decoded frames and frames read
// without decode, with the session id given or taken from the frames; it
// declines every frame that is not a plain text chunk, and all of them
// when the fast paths are off.
func TestACPFastTextMatches(t *testing.T) {
	frames := conformance.TextFrames()
	for i, f := range frames {
		f.SessionID = "sess-<" + fmt.Sprint(i%2) + ">"
	}
	texts := 0
	for _, session := range []string{"", "s&1"} {
		for _, f := range frames {
			raw, _ := json.Marshal(f)
			want := session
			if want == "" {
				want = f.SessionID
			}
			var general []byte
			if ups, _ := Updates(f); len(ups) == 1 && ups[0].AgentMessageChunk != nil && f.ResponseKind == e2a.KindChunk {
				general, _ = json.Marshal(jsonrpc.Notification{JSONRPC: "2.0", Method: e2a.ACPSessionUpdate,
					Params: acpsdk.SessionNotification{SessionId: acpsdk.SessionId(want), Update: ups[0]}})
			}
			for _, lazy := range []bool{false, true} {
				fr := &render.Frame{Response: f, Raw: raw, StreamSeq: 1}
				if lazy {
					var err error
					if fr, err = render.HeadFrame(raw, 1); err != nil {
						t.Fatal(err)
					}
				}
				b, used, ok := TextUpdate(fr, session)
				if !ok {
					continue
				}
				texts++
				if used != want || !bytes.Equal(b, general) {
					t.Fatalf("session %q lazy %v: session %q\nfast:    %s\ngeneral: %s", session, lazy, used, b, general)
				}
			}
		}
	}
	if texts == 0 {
		t.Fatal("no text update")
	}
	old := fastText
	fastText = false
	defer func() { fastText = old }()
	for _, f := range frames {
		raw, _ := json.Marshal(f)
		if _, _, ok := TextUpdate(&render.Frame{Response: f, Raw: raw}, ""); ok {
			t.Fatal("a text update with the fast paths off")
		}
	}
}

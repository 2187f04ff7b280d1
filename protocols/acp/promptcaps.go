package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// What a pool's prompts may carry. ACP's initialize declares
// promptCapabilities image and audio per content block type, and a client
// must not send a block the agent did not declare (Zed offers image
// attachment only when image is true); a pool declares the media types it
// takes as its input modes (bridge.PoolInfo.InputModes: `e2a agent
// --input-modes`, an A2A upstream's card), which its A2A card lists and
// the A2A doors enforce. So initialize declares image when the modes
// accept some image/* type, audio some audio/*, and session/prompt refuses
// an image or audio block (or an E2A file in params.files) of a type they
// do not accept, before anything is published.
//
// A pool that declares no modes takes normalizer.A2AInputModes (text/plain,
// application/json): neither image nor audio, as its A2A card says. That
// is the honest answer for the pools that declare none: the demo agent
// reads only the text of a prompt (an image is dropped without a word),
// and the OpenAI bridge forwards an image to a model that may not see
// (a text-only model refuses the call, or answers about an attachment it
// never got); a vision or audio model's pool declares it with
// --input-modes (image/*, audio/wav), which opens both the A2A doors and
// ACP's.
//
// Resource links and embedded resources are not checked: ACP requires
// every agent to take resource_link blocks (they are references, which a
// bridge passes on as text), and embeddedContext, declared, admits any
// resource: the files an editor attaches (text/x-go, text/markdown) are
// context, whatever the pool's modes.

// InputModes is the optional role of a [host.RPCHost] that knows the
// media types each agent pool takes: its pool info's input modes, which
// its A2A card lists as defaultInputModes and the A2A doors enforce on
// file parts. Without it every pool takes normalizer.A2AInputModes.
type InputModes interface {
	// PoolInputModes is the input modes of pool ("" for the default
	// pool's); empty when the pool declares none (the defaults).
	PoolInputModes(ctx context.Context, pool string) []string
}

// poolModes is the input modes of pool: the host's (InputModes), else,
// or when the pool declares none, normalizer.A2AInputModes.
func (d *frontDoor) poolModes(ctx context.Context, pool string) []string {
	var modes []string
	if im, ok := d.h.(InputModes); ok {
		modes = im.PoolInputModes(ctx, pool)
	}
	if len(modes) == 0 {
		modes = normalizer.A2AInputModes
	}
	return modes
}

// promptCapabilities is initialize's promptCapabilities for a pool of
// input modes modes (see above).
func promptCapabilities(modes []string) map[string]any {
	return map[string]any{"image": normalizer.AcceptsSomeOf(modes, "image"), "audio": normalizer.AcceptsSomeOf(modes, "audio"), "embeddedContext": true}
}

// promptPool is the pool a session/prompt of this call's caller goes to,
// which initialize answers for: the endpoint's pool (/pools/<pool>/acp,
// ?agent=), else the routing rule's for session/prompt, found by
// normalizing one (a method rule such as session/*=x sends prompts
// elsewhere than initialize); initialize's own pool (res) if that fails.
func (d *frontDoor) promptPool(nin normalizer.Input, res *normalizer.Result) string {
	if nin.Agent != "" {
		return nin.Agent
	}
	nin.Body, nin.RequestID, nin.NewID = nil, "", func() string { return "acp-initialize-probe" }
	nin.RPC = &normalizer.RPCRequest{ID: json.RawMessage(`0`), Method: e2a.ACPSessionPrompt,
		Params: json.RawMessage(`{"sessionId":"acp-initialize-probe","prompt":[]}`)}
	if r, err := d.h.Normalizer().FromACP(nin); err == nil {
		return r.Pool
	}
	return res.Pool
}

// checkPromptMedia refuses a prompt (env, its E2A params lifted) to pool
// carrying an image or audio block, or a file of params.files, of a media
// type pool's input modes do not accept: invalid params (-32602) naming
// the block and the pool's modes. nil when it may be published.
func (d *frontDoor) checkPromptMedia(ctx context.Context, pool string, env *e2a.Envelope) *jsonrpc.Error {
	key := "prompt"
	if p, ok := env.Params["prompt"]; !ok || p == nil {
		key = "content_blocks" // MergeParamsToACPPrompt's order
	}
	blocks, _ := normalizer.MergeParamsToACPPrompt(env)["prompt"].([]any)
	files, _ := env.Params["files"].([]any)
	var modes []string
	for i, b := range blocks {
		m, _ := b.(map[string]any)
		kind, _ := m["type"].(string)
		if kind != "image" && kind != "audio" {
			continue
		}
		if modes == nil {
			modes = d.poolModes(ctx, pool)
		}
		mt, _ := m["mimeType"].(string)
		if mt == "" {
			mt, _ = m["mime_type"].(string)
		}
		if !normalizer.AcceptsSomeOf(modes, kind) || (mt != "" && !normalizer.AcceptsMediaType(modes, mt)) {
			return mediaRefused(fmt.Sprintf("%s[%d]: an %s block of type %q", key, i, kind, mt), pool, modes)
		}
	}
	for i, f := range files {
		m, _ := f.(map[string]any)
		mt, _ := m["mime_type"].(string)
		if mt == "" {
			continue // as the A2A doors: a file without a media type is not checked
		}
		if modes == nil {
			modes = d.poolModes(ctx, pool)
		}
		if !normalizer.AcceptsMediaType(modes, mt) {
			return mediaRefused(fmt.Sprintf("params.files[%d]: a file of type %q", i, mt), pool, modes)
		}
	}
	return nil
}

// mediaRefused is the invalid params error of what, which pool's input
// modes do not accept.
func mediaRefused(what, pool string, modes []string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("%s is not accepted by agent pool %q (input modes %s): a pool declares the media it takes in its pool info (e2a agent --input-modes)",
			what, pool, strings.Join(modes, ", ")),
		Data: map[string]any{"pool": pool, "inputModes": modes}}
}

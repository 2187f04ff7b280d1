package a2amap

import "github.com/e2a-pipeline/pipeline/e2a"

// E2AResponseToA2AStreamPayload is e2a_response_to_a2a_stream_payload
// (spec §8, §12.6): for an a2a.stream_event frame, the A2A StreamResponse
// with exactly one branch, {"<branch>": payload}, branch one of task,
// message, status_update, artifact_update. ok is false for any other kind.
func E2AResponseToA2AStreamPayload(r *e2a.Response) (map[string]any, bool) {
	if r.ResponseKind != e2a.KindA2AStreamEvent {
		return nil, false
	}
	b, err := r.StreamEvent()
	if err != nil {
		return nil, false
	}
	if !KnownBranch(b.Branch) {
		return nil, false
	}
	return map[string]any{b.Branch: b.Payload}, true
}

package egress

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// requestLookupSubject returns the filter matching the request subject of
// requestID whatever its agent pool (e2a.req.*.<token>).
func requestLookupSubject(requestID string) (string, error) {
	return subjects.RequestAnyPool(requestID)
}

// lookupRequest reads the envelope message of requestID from the request
// stream; it returns nil when there is none.
func lookupRequest(ctx context.Context, m *streams.DirectGetter, stream, requestID string) (*nats.Msg, error) {
	subj, err := requestLookupSubject(requestID)
	if err != nil {
		return nil, nil
	}
	return m.GetLast(ctx, stream, subj)
}

// fetchEnvelope reads and decodes the envelope of requestID; it returns nil
// when the request stream does not hold it.
func fetchEnvelope(ctx context.Context, m *streams.DirectGetter, stream, requestID string) (*e2a.Envelope, []byte, error) {
	msg, err := lookupRequest(ctx, m, stream, requestID)
	if err != nil || msg == nil {
		return nil, nil, err
	}
	env, err := e2a.FromJSON(msg.Data)
	if err != nil {
		return nil, msg.Data, nil
	}
	return env, msg.Data, nil
}

func responseSubject(id string) (string, error) { return subjects.Response(id) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

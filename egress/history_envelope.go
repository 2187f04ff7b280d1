package egress

import (
	"context"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// HistoricEnvelope returns the envelope of request id as the History holds
// it ([WithHistory]), for principal p: the lookup the read API makes for a
// request the hot streams no longer hold, under its rules (asked only for
// an id with a time, [RequestIDTime]; bounded per Service and, for a
// principal that does not see every request, per principal). It is nil,
// with no error, when there is no History, the History lacks the request,
// or p may not read it (tenant.Read of the envelope's user_id): another
// principal's request is answered as an unknown one. err wraps
// [ErrHistoryUnavailable] or [ErrHistoryCorrupt] ([Classify] answers
// them), or is ctx's.
func (s *Service) HistoricEnvelope(ctx context.Context, p tenant.Principal, id string) ([]byte, error) {
	user := "" // bounded by the Service's limit alone (fromHistory)
	if !p.SeesAll() {
		user = p.ID
	}
	h, err := s.historyCopy(ctx, id, user)
	if err != nil || h == nil || !p.Allows(tenant.Read, ownerOfData(h.Envelope)) {
		return nil, err
	}
	return h.Envelope, nil
}

package egress

import (
	"context"

	"github.com/e2a-pipeline/pipeline/streams"
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

// HistoricRequestMsg returns the envelope message of request id as the
// History holds it (the subject it was stored under in E2A_REQUESTS, when,
// the envelope), for ingress's task store: a one-turn A2A or AgentVault
// task has no record, its first request stands for it, and a task still
// running when E2A_REQUESTS dropped that request (one running longer than
// E2A_REQUESTS_MAX_AGE) is read from here. The lookup is the read API's
// (asked only for an id with a time, or one whose frames are hot; bounded
// per Service) and checks no owner: the caller does. found is false, with
// no error, when there is no History, the History lacks the request or
// does not tell its subject and time; err as HistoricEnvelope's.
func (s *Service) HistoricRequestMsg(ctx context.Context, id string) (m streams.RawMsg, found bool, err error) {
	h, err := s.historyCopy(ctx, id, "")
	if err != nil || h == nil || h.Subject == "" || h.Stored.IsZero() {
		return streams.RawMsg{}, false, err
	}
	return streams.RawMsg{Subject: h.Subject, Time: h.Stored, Data: h.Envelope}, true, nil
}

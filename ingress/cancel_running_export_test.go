package ingress

import (
	"context"

	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// CancelRunningAsRead is the cancel of the running A2A task taskID of the
// pool demo by s (cancelRunning, with authentication off) as a cancel that
// read the task when its record listed requestIDs: a turn appended since
// is found by the mark's compare-and-set. It returns the requests of the
// task as last read.
func CancelRunningAsRead(ctx context.Context, s *Server, taskID string, requestIDs []string) ([]string, error) {
	t := &host.Task{Session: host.Session{ID: taskID, Protocol: "a2a", Pool: "demo", RequestIDs: requestIDs}}
	after, err := s.cancelRunning(ctx, Principal{UserID: "anonymous", Scheme: SchemeNone, Open: true}, t, s.cancelOwnTurns)
	return after.RequestIDs, err
}

// CancelSessionAsRead is the cancel of the turns of the ACP session sid by
// s (protocolHost.CancelTurns, as ACP's session/cancel calls it, with
// authentication off) as a cancel that read the session when its record
// listed requestIDs.
func CancelSessionAsRead(ctx context.Context, s *Server, sid string, requestIDs []string) error {
	sess := &host.Session{ID: sid, Protocol: "acp", Pool: "demo", RequestIDs: requestIDs}
	return protocolHost{s}.CancelTurns(ctx, sess)
}

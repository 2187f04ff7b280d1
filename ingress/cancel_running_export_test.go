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

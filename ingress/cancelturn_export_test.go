package ingress

// SetCancelTurnHook makes the cancel of an interrupted task by s call f
// with the task's id once it has checked that the task's last turn ended
// interrupted, before the cancel turn is appended to the task's record.
// Set it before s serves the cancel.
func SetCancelTurnHook(s *Server, f func(taskID string)) {
	s.cancelTurnChecked = f
}

// SetCancelNewerTurnHook makes the cancel of an interrupted task by s call
// f with the task's id and the request id of a turn appended since the
// task was checked (the client's answer), found not finished, before that
// turn is cancelled. Set it before s serves the cancel.
func SetCancelNewerTurnHook(s *Server, f func(taskID, requestID string)) {
	s.cancelNewerTurn = f
}

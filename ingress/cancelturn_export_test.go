package ingress

// SetCancelTurnHook makes the cancel of an interrupted task by s call f
// with the task's id once it has checked that the task's last turn ended
// interrupted, before the cancel turn is appended to the task's record.
// Set it before s serves the cancel.
func SetCancelTurnHook(s *Server, f func(taskID string)) {
	s.cancelTurnChecked = f
}

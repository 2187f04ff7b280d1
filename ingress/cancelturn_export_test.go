package ingress

import "testing"

// SetCancelTurnHook makes the cancel of an interrupted task call f with the
// task's id once it has checked that the task's last turn ended
// interrupted, before the cancel turn is appended to the task's record,
// until the test ends. The test must not run in parallel.
func SetCancelTurnHook(t testing.TB, f func(taskID string)) {
	t.Helper()
	cancelTurnChecked = f
	t.Cleanup(func() { cancelTurnChecked = nil })
}

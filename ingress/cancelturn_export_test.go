package ingress

import "context"

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

// SetCancelCheckHook makes the cancel of an interrupted task by s call f
// with the task's id and its requests as it last read them, each time it
// is about to read their frames; nil removes it. f runs in the cancel's
// goroutine.
func SetCancelCheckHook(s *Server, f func(taskID string, requestIDs []string)) {
	if f == nil {
		s.cancelChecking.Store(nil)
		return
	}
	s.cancelChecking.Store(&f)
}

// SetAppendedHook makes s call f once a turn is appended to its task's or
// session's record, before it is checked again (stillOpen) and published:
// a turn f holds is listed and not stored. f runs in the appending call's
// goroutine. nil removes it.
func SetAppendedHook(s *Server, f func(kind, id, requestID string)) {
	if f == nil {
		s.turnAppended.Store(nil)
		return
	}
	s.turnAppended.Store(&f)
}

// SetUnstoredBeforeHook makes s call f when its check of a turn just
// recorded (stillOpen) finds a turn listed before it not stored, before it
// awaits that turn. Set it before s serves the turn.
func SetUnstoredBeforeHook(s *Server, f func(taskID, requestID, unstored string)) {
	if f == nil {
		s.unstoredBefore.Store(nil)
		return
	}
	s.unstoredBefore.Store(&f)
}

// SetRecordReadHook makes s call reading when a caller of s is about to
// read a task's record (GetTask, tasks/get, CancelTask, a blocking answer
// at its turn's end, a message naming the task), and read once it has,
// with the requests it lists, before the read is used; either may be nil.
// They run in the reading call's goroutine.
func SetRecordReadHook(s *Server, reading func(taskID string), read func(taskID string, requestIDs []string)) {
	s.recordReading.Store(nil)
	if reading != nil {
		s.recordReading.Store(&reading)
	}
	s.recordRead.Store(nil)
	if read != nil {
		s.recordRead.Store(&read)
	}
}

// SetLaterTurnHook makes s call reading when a turn's stream is about to
// read the turn its task's record lists after it (LaterTurn, at the
// turn's end), and read once it has, with that turn ("" when none),
// before it awaits it; either may be nil. They run in the stream's
// goroutine.
func SetLaterTurnHook(s *Server, reading func(taskID string), read func(taskID, next string)) {
	s.laterReading.Store(nil)
	if reading != nil {
		s.laterReading.Store(&reading)
	}
	s.laterRead.Store(nil)
	if read != nil {
		s.laterRead.Store(&read)
	}
}

// Finished reports whether requestID has its final frame (egress's
// Service.Finished), false when that cannot be read.
func Finished(ctx context.Context, s *Server, requestID string) bool {
	ok, err := s.egress.Finished(ctx, requestID)
	return err == nil && ok
}

// SetMarkMetHook makes s call f when the append of a turn (an A2A
// message) meets the mark of a running turn that tasks/cancel is
// cancelling (marked), before it awaits that turn's end; nil removes it.
// f runs in the appending call's goroutine.
func SetMarkMetHook(s *Server, f func(taskID, requestID, marked string)) {
	if f == nil {
		s.markMet.Store(nil)
		return
	}
	s.markMet.Store(&f)
}

// SetCancelMarkedHook makes s call f once tasks/cancel has marked the
// task's newest turn requestID as the one whose cancel ends it, before it
// cancels it; nil removes it. f runs in the cancel's goroutine.
func SetCancelMarkedHook(s *Server, f func(taskID, requestID string)) {
	if f == nil {
		s.cancelMarked.Store(nil)
		return
	}
	s.cancelMarked.Store(&f)
}

// KeptTurns is how many turns s keeps the records of (keepRecord,
// takeOver).
func KeptTurns(s *Server) int {
	s.keeper.mu.Lock()
	defer s.keeper.mu.Unlock()
	return len(s.keeper.turns)
}

// SetKeptLookHook makes s call f at each look of its keeper that finds a
// kept turn running (f is given the turn's request id); nil removes it.
// f runs in the keeper's goroutine.
func SetKeptLookHook(s *Server, f func(requestID string)) {
	if f == nil {
		s.keptLook.Store(nil)
		return
	}
	s.keptLook.Store(&f)
}

package ingress

// SetAppendHook makes the task store of s call f when the append of a
// turn to a task or session record starts (appendAfter), before the
// record is read: a turn f holds there is received and not yet recorded.
// f runs in the appending call's goroutine; nil removes it.
func SetAppendHook(s *Server, f func(kind, id, requestID string)) {
	if f == nil {
		s.opts.tasks.appending.Store(nil)
		return
	}
	s.opts.tasks.appending.Store(&f)
}

package ingress

import "context"

// WithStdioHook returns ctx carrying a hook ServeACPStdio calls, for tests
// that must order its calls: event "wait" when a call waits for a
// session/cancel read before it (a session/cancel: for the cancels of the
// session's prompts in flight), "cancel-wait" when such a cancel waits
// for a prompt's publish, "run" when a call's handler starts and
// "done" when it returned (in the call's goroutine: a hook that blocks
// holds that call back).
func WithStdioHook(ctx context.Context, f func(event, method string)) context.Context {
	return context.WithValue(ctx, stdioHookKey{}, f)
}

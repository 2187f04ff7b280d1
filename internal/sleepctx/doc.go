// Package sleepctx waits a duration or until a context is done: the
// timer-and-select the stages' retries and backoffs (bridge, workflow,
// ingress's rate limiter, the console's indexer) and the demo and TCK
// agents' pauses each had a copy of; Ticks, the ticker loop of the
// stages' periodic checks; and Backoff, the randomized wait between two
// compare-and-sets of a shared key (push's configs and slots, the
// bridge's conversations).
package sleepctx
